// A chosen file too large to paste goes straight to storage by the signed-URL flow
// (docs/files.md): declare it (`POST /v1/files/uploads`), PUT its bytes to the signed URL
// (or each part of a multipart plan, a few at a time, keeping the ETags S3 answers), confirm
// (`POST /v1/files/{id}/complete`), then wait while a worker checks a large file. The bytes
// never pass through the API; the console's Content-Security-Policy names the uploads
// bucket's origin in connect-src for these PUTs (infra/console_headers.py).
//
// A part (or the one PUT) is sent again when it fails, up to PART_TRIES times with a pause;
// a part on a fresh URL (`POST /v1/files/{id}/parts`) when its URL is about to expire or
// storage refused it (403): a slow link uploading a 2 GiB file outlasts the first URLs'
// 15 minutes. The first part that fails for good stops the others (no bytes keep going in
// the background), and the upload is cancelled (`POST /v1/files/{id}/cancel`).
import { ApiError, api, call, type Schemas } from "./client";

type FileOut = Schemas["FileOut"];
type Plan = Schemas["MultipartPlanOut"];
type Part = Plan["parts"][number];

/** Parts PUT at the same time: enough to fill a link, few enough to keep memory flat. */
const PARALLEL_PARTS = 3;
/** Tries of one part before the upload gives up. */
const PART_TRIES = 3;
/** A URL this close to its expiry is signed again before a part is sent on it. */
const RESIGN_BEFORE_MS = 60_000;
/** How often a file still being checked (`uploaded`) is looked at again, and for how long. */
const CHECK_POLL_MS = 2000;
const CHECK_FOR_MS = 30 * 60_000;

export type Progress = (sentBytes: number, totalBytes: number) => void;

class StorageRefused extends ApiError {}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function put(url: string, body: Blob, signal: AbortSignal, headers: Record<string, string> = {}): Promise<Response> {
  let answer: Response;
  try {
    answer = await fetch(url, { method: "PUT", body, headers, credentials: "omit", signal });
  } catch (cause) {
    throw new ApiError(0, "upload_failed", `Storage could not be reached (${String(cause)}).`);
  }
  if (!answer.ok) {
    throw new StorageRefused(answer.status, "upload_failed", `Storage refused the upload (HTTP ${answer.status}).`);
  }
  return answer;
}

/** `send` up to PART_TRIES times, pausing between, until the signal stops it. */
async function withTries<T>(signal: AbortSignal, send: (attempt: number, last: unknown) => Promise<T>): Promise<T> {
  let last: unknown = null;
  for (let attempt = 1; ; attempt++) {
    try {
      return await send(attempt, last);
    } catch (caught) {
      if (signal.aborted || attempt >= PART_TRIES) throw caught;
      last = caught;
      await pause(1000 * attempt);
    }
  }
}

/** Signed URLs for parts, fresh ones when asked (`POST /v1/files/{id}/parts`). */
class PartUrls {
  private readonly urls = new Map<number, Part>();
  private expiresAt: number;

  constructor(
    private readonly fileId: string,
    plan: Plan,
  ) {
    plan.parts.forEach((part) => this.urls.set(part.part_number, part));
    this.expiresAt = Date.parse(plan.expires_at);
  }

  async url(number: number, fresh: boolean): Promise<string> {
    if (fresh || Date.now() > this.expiresAt - RESIGN_BEFORE_MS) {
      const signed = await call(
        api.POST("/v1/files/{file_id}/parts", {
          params: { path: { file_id: this.fileId } },
          body: { part_numbers: [number] },
        }),
      );
      signed.multipart.parts.forEach((part) => this.urls.set(part.part_number, part));
      this.expiresAt = Date.parse(signed.multipart.expires_at);
    }
    return this.urls.get(number)!.url;
  }
}

async function putParts(
  file: File,
  fileId: string,
  plan: Plan,
  progress: Progress,
  signal: AbortSignal,
): Promise<{ part_number: number; etag: string }[]> {
  const etags = new Map<number, string>();
  const urls = new PartUrls(fileId, plan);
  let sent = 0;
  const waiting = [...plan.parts];
  function sendPart(part: Part): Promise<string> {
    return withTries(signal, async (_attempt, last) => {
      const fresh = last instanceof StorageRefused && last.status === 403; // an expired URL
      const answer = await put(await urls.url(part.part_number, fresh), file.slice(part.offset, part.offset + part.bytes), signal);
      const etag = answer.headers.get("ETag");
      if (!etag) {
        throw new ApiError(0, "upload_failed", "Storage answered a part without its ETag (the bucket's CORS must expose it).");
      }
      return etag;
    });
  }
  async function worker(): Promise<void> {
    for (let part = waiting.shift(); part && !signal.aborted; part = waiting.shift()) {
      etags.set(part.part_number, await sendPart(part));
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
  const stop = new AbortController();
  let confirmed: FileOut;
  try {
    if (started.multipart) {
      const parts = await putParts(file, fileId, started.multipart, progress, stop.signal);
      confirmed = (await call(api.POST("/v1/files/{file_id}/complete", { ...path, body: { parts } }))).file;
    } else {
      await withTries(stop.signal, () => put(started.upload.url, file, stop.signal, started.upload.headers));
      progress(file.size, file.size);
      confirmed = (await call(api.POST("/v1/files/{file_id}/complete", { ...path, body: {} }))).file;
    }
  } catch (caught) {
    stop.abort(); // the other parts stop here, not in the background
    void api.POST("/v1/files/{file_id}/cancel", path).catch(() => undefined);
    throw caught;
  }
  const until = Date.now() + CHECK_FOR_MS;
  while (confirmed.status === "uploaded" && Date.now() < until) {
    await pause(CHECK_POLL_MS);
    confirmed = (await call(api.GET("/v1/files/{file_id}", path))).file;
  }
  if (confirmed.status === "uploaded") {
    throw new ApiError(0, "file_not_ready", `The file ${fileId} is still being checked: quote it again in a few minutes.`);
  }
  return confirmed;
}
