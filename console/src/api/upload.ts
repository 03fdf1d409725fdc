// A chosen file too large to paste goes straight to storage by the signed-URL flow
// (docs/files.md): declare it (`POST /v1/files/uploads`), PUT its bytes to the signed URL
// (or each part of a multipart plan, a few at a time, keeping the ETags S3 answers), confirm
// (`POST /v1/files/{id}/complete`), then wait while a worker checks a large file. The bytes
// never pass through the API; the console's Content-Security-Policy names the uploads
// bucket's origin in connect-src for these PUTs (infra/console_headers.py).
import { ApiError, api, call, type Schemas } from "./client";

type FileOut = Schemas["FileOut"];
type Plan = Schemas["MultipartPlanOut"];

/** Parts PUT at the same time: enough to fill a link, few enough to keep memory flat. */
const PARALLEL_PARTS = 3;
/** How often a file still being checked (`uploaded`) is looked at again. */
const CHECK_POLL_MS = 2000;

export type Progress = (sentBytes: number, totalBytes: number) => void;

async function put(url: string, body: Blob, headers: Record<string, string> = {}): Promise<Response> {
  let answer: Response;
  try {
    answer = await fetch(url, { method: "PUT", body, headers, credentials: "omit" });
  } catch (cause) {
    throw new ApiError(0, "upload_failed", `Storage could not be reached (${String(cause)}).`);
  }
  if (!answer.ok) {
    throw new ApiError(answer.status, "upload_failed", `Storage refused the upload (HTTP ${answer.status}).`);
  }
  return answer;
}

async function putParts(file: File, plan: Plan, progress: Progress): Promise<{ part_number: number; etag: string }[]> {
  const etags = new Map<number, string>();
  let sent = 0;
  const waiting = [...plan.parts];
  async function worker(): Promise<void> {
    for (let part = waiting.shift(); part; part = waiting.shift()) {
      const answer = await put(part.url, file.slice(part.offset, part.offset + part.bytes));
      const etag = answer.headers.get("ETag");
      if (!etag) {
        throw new ApiError(0, "upload_failed", "Storage answered a part without its ETag (the bucket's CORS must expose it).");
      }
      etags.set(part.part_number, etag);
      sent += part.bytes;
      progress(sent, file.size);
    }
  }
  await Promise.all(Array.from({ length: Math.min(PARALLEL_PARTS, plan.parts.length) }, worker));
  return [...etags.entries()].sort(([a], [b]) => a - b).map(([part_number, etag]) => ({ part_number, etag }));
}

/** Upload `file` by the signed-URL flow; its file object once checked (`processed` or `error`). */
export async function uploadSigned(
  file: File,
  purpose: "batch" | "batch_input",
  progress: Progress = () => undefined,
): Promise<FileOut> {
  const started = await call(
    api.POST("/v1/files/uploads", {
      body: { filename: file.name, bytes: file.size, content_type: "application/jsonl", purpose },
    }),
  );
  const fileId = started.file.id;
  const path = { params: { path: { file_id: fileId } } };
  let confirmed: FileOut;
  if (started.multipart) {
    const parts = await putParts(file, started.multipart, progress);
    confirmed = (await call(api.POST("/v1/files/{file_id}/complete", { ...path, body: { parts } }))).file;
  } else {
    await put(started.upload.url, file, started.upload.headers);
    progress(file.size, file.size);
    confirmed = (await call(api.POST("/v1/files/{file_id}/complete", { ...path, body: {} }))).file;
  }
  while (confirmed.status === "uploaded") {
    await new Promise((resolve) => setTimeout(resolve, CHECK_POLL_MS));
    confirmed = (await call(api.GET("/v1/files/{file_id}", path))).file;
  }
  return confirmed;
}
