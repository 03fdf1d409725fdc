"""The file store and the S3 objects adapter on moto: records round-trip with their TTL and org
index, writers switch to multipart past one part, reads stream in chunks."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from botocore.exceptions import ClientError

from batchroute.adapters.aws import client
from batchroute.adapters.batch_artifacts import BatchArtifacts
from batchroute.adapters.dynamo.files import FileStore
from batchroute.adapters.s3_objects import PART_BYTES, S3Objects
from batchroute.config import get_settings
from batchroute.domain.batches.files import FileRecord
from batchroute.domain.batches.jsonl import LineError
from batchroute_tools.local.provision import LocalStack


def store() -> FileStore:
    return FileStore(get_settings().table_name("batches"))


RECORD = FileRecord(
    file_id="file_01jq0000000000000000000000",
    org_id="org_a",
    filename="items.jsonl",
    purpose="batch_input",
    content_type="application/jsonl",
    bytes=120,
    status="uploading",
    created_at="2026-03-01T00:00:00.000Z",
    s3_key="files/org_a/file_01jq0000000000000000000000",
    upload_expires_at="2026-03-01T00:15:00.000Z",
)


def raw_item(file_id: str) -> dict[str, object]:
    table = get_settings().table_name("batches")
    item: dict[str, object] = client("dynamodb").get_item(
        TableName=table, Key={"pk": {"S": f"FILE#{file_id}"}, "sk": {"S": "META"}}
    )["Item"]
    return item


def test_a_record_round_trips_with_its_ttl_and_org_index(local_aws: LocalStack) -> None:
    # Given an uploading record written with a TTL
    store().create(RECORD, ttl=1_800_000_000)
    # Then it reads back equal, indexed under its org, expiring with its staging object
    assert store().get(RECORD.file_id) == RECORD
    item = raw_item(RECORD.file_id)
    assert item["gsi1pk"] == {"S": "ORG#org_a"} and item["gsi1sk"] == {"S": f"FILE#{RECORD.file_id}"}
    assert item["ttl"] == {"N": "1800000000"}
    # When it is completed with line errors
    done = replace(
        RECORD,
        status="error",
        errors=(LineError(2, "invalid_json", "line 2 is not JSON: x"),),
        error_count=1,
        error={"code": "invalid_lines", "message": "1 line(s) ..."},
        sha256="ab" * 32,
        upload_expires_at=None,
    )
    assert store().replace(done, expected_status="uploading") is True
    # Then it reads back equal, without the TTL; a stale replace is refused
    assert store().get(RECORD.file_id) == done
    assert "ttl" not in raw_item(RECORD.file_id)
    assert store().replace(RECORD, expected_status="uploading") is False
    assert store().get("file_01jq0000000000000000000001") is None


def test_a_writer_uses_one_put_for_small_objects_and_multipart_past_a_part(local_aws: LocalStack) -> None:
    objects = S3Objects(local_aws.buckets["uploads"])
    # A small object: one put
    small = objects.writer("files/o/small", content_type="application/jsonl")
    small.write(b'{"a": 1}\n')
    small.close()
    assert b"".join(objects.chunks("files/o/small")) == b'{"a": 1}\n'
    # A 12 MiB object written 1 MiB at a time: two parts (8 MiB + 4 MiB)
    block = os.urandom(1024 * 1024)
    big = objects.writer("files/o/big", content_type="application/jsonl")
    for _ in range(12):
        big.write(block)
    assert big._upload_id is not None and len(big._parts) == 1
    big.close()
    assert objects.size("files/o/big") == 12 * 1024 * 1024
    chunks = list(objects.chunks("files/o/big", chunk_bytes=1024 * 1024))
    assert len(chunks) == 12 and all(chunk == block for chunk in chunks)
    # An aborted multipart write leaves nothing
    dropped = objects.writer("files/o/dropped", content_type="application/jsonl")
    dropped.write(os.urandom(PART_BYTES + 1))
    dropped.abort()
    assert objects.size("files/o/dropped") is None
    uploads = client("s3").list_multipart_uploads(Bucket=local_aws.buckets["uploads"])
    assert uploads.get("Uploads", []) == []


def test_copy_delete_and_size(local_aws: LocalStack) -> None:
    objects = S3Objects(local_aws.buckets["uploads"])
    writer = objects.writer("staging/o/f", content_type="application/jsonl")
    writer.write(b"{}\n")
    writer.close()
    objects.copy("staging/o/f", "files/o/f")
    objects.delete("staging/o/f")
    assert objects.size("staging/o/f") is None
    assert objects.size("files/o/f") == 3
    objects.delete("staging/o/missing")  # deleting nothing is fine


def test_a_missing_object_reads_empty_in_one_get_only_when_missing_is_ok(local_aws: LocalStack) -> None:
    s3 = client("s3")
    calls: list[str] = []
    s3.meta.events.register("before-call.s3", lambda model, **_: calls.append(model.name))
    objects = S3Objects(local_aws.buckets["uploads"], s3=s3)
    # A missing object, read with missing_ok: no bytes, from one GET (no HEAD before it)
    assert list(objects.chunks("results/o/none", missing_ok=True)) == []
    assert calls == ["GetObject"]
    # Without missing_ok the GET's NoSuchKey is raised
    with pytest.raises(ClientError) as raised:
        list(objects.chunks("results/o/none"))
    assert raised.value.response["Error"]["Code"] == "NoSuchKey"
    # An object that exists reads whole either way
    objects.put("results/o/some", b"{}\n", content_type="application/jsonl")
    assert b"".join(objects.chunks("results/o/some", missing_ok=True)) == b"{}\n"


def test_a_json_artifact_reads_in_one_get_and_a_missing_one_is_none(local_aws: LocalStack) -> None:
    s3 = client("s3")
    calls: list[str] = []
    s3.meta.events.register("before-call.s3", lambda model, **_: calls.append(model.name))
    artifacts = BatchArtifacts(S3Objects(local_aws.buckets["artifacts"], s3=s3))
    assert artifacts.read_json("batches/b/receipt.json") is None
    assert calls == ["GetObject"]
    artifacts.write_json("batches/b/receipt.json", {"total": 3})
    calls.clear()
    assert artifacts.read_json("batches/b/receipt.json") == {"total": 3}
    assert calls == ["GetObject"]
