"""The committer's parts on their own: failpoints, state encodings, the watermark."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from harness import write_rows

from stream_sink.commit import (
    JOB_ID,
    MAX_COMMITTED_CHECKPOINT_ID,
    OPERATOR_ID,
    StagedManifests,
    committed_watermark,
    deserialize_staged_manifests,
    serialize_staged_manifests,
)
from stream_sink.commit.committer_state import (
    decode_staged,
    encode_staged,
    id_of,
    pending_key,
    staged_key,
)
from stream_sink.commit.failpoints import ENV_VAR, FAILPOINTS, parse_failpoints
from stream_sink.commit.iceberg.staging import (
    ManifestNamer,
    read_staged_files,
    write_staging_manifests,
)
from stream_sink.exceptions import CorruptStateError, InvalidOptionError, UnsupportedError
from stream_sink.table.table import Table


def test_failpoint_specs_parse_and_refuse_unknown_names() -> None:
    assert parse_failpoints("") == {}
    assert parse_failpoints("after-table-commit@3, after-pending-write") == {
        "after-table-commit": 3,
        "after-pending-write": 1,
    }
    with pytest.raises(InvalidOptionError, match="unknown failpoint 'after-lunch'"):
        parse_failpoints("after-lunch")
    with pytest.raises(InvalidOptionError, match="positive int"):
        parse_failpoints("after-table-commit@0")
    assert len(FAILPOINTS) == len(set(FAILPOINTS)) == 9


@pytest.mark.slow
def test_failpoint_kills_with_sigkill_on_the_nth_hit() -> None:
    code = (
        "from stream_sink.commit import failpoint\n"
        "for i in range(5):\n"
        "    failpoint('after-pending-write')\n"
        "    failpoint('after-table-commit')\n"
        "    print(i, flush=True)\n"
    )
    env_value = "after-table-commit@3"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={ENV_VAR: env_value, "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL
    assert proc.stdout.split() == ["0", "1"]


def test_state_keys_sort_in_numeric_order() -> None:
    keys = [pending_key(b) for b in (10, 9, 100, 0)]
    assert [id_of(k, b"pending/") for k in sorted(keys)] == [0, 9, 10, 100]
    assert staged_key(7) == b"staged/00000000000000000007"


def test_staged_value_round_trip_and_damage() -> None:
    batches = ((3, b"x" * 5), (4, b""), (5, b"yz"))
    raw = encode_staged(batches)
    assert decode_staged(raw, where="w") == batches
    with pytest.raises(CorruptStateError, match="w: truncated"):
        decode_staged(raw[:-1], where="w")
    with pytest.raises(CorruptStateError, match="not a staged"):
        decode_staged(b"garbage", where="w")
    newer = raw[:4] + b"\x00\x09" + raw[6:]
    with pytest.raises(UnsupportedError, match="format version 9"):
        decode_staged(newer, where="w")


def test_staged_manifests_round_trip(table: Table) -> None:
    result = write_rows(table, [(1, "a"), (2, "b")])
    namer = ManifestNamer("job", "sink", "0123abcd")
    delta = write_staging_manifests(table, namer, 7, 6, result)
    assert delta.data_manifests[0].manifest_path.endswith("/job-sink-7-6-0123abcd-00001.avro")
    raw = serialize_staged_manifests(delta)
    assert raw.startswith(b"SSDM\x00\x01")
    back = deserialize_staged_manifests(raw, where="w")
    assert back == delta
    assert read_staged_files(table.io, table.metadata, back) == result
    empty = serialize_staged_manifests(StagedManifests())
    assert deserialize_staged_manifests(empty, where="w") == StagedManifests()
    with pytest.raises(UnsupportedError, match="version 3"):  # 2 adds truncate
        deserialize_staged_manifests(b"SSDM\x00\x03{}", where="w")
    with pytest.raises(CorruptStateError, match="w: malformed"):
        deserialize_staged_manifests(b"SSDM\x00\x01{", where="w")


def test_watermark_is_scoped_by_job_and_operator_and_skips_other_writers(table: Table) -> None:
    def commit(props: dict[str, str]) -> None:
        op = table.new_fast_append()
        op.set_all(props)
        op.commit()

    meta = table.refresh().metadata
    assert committed_watermark(meta, "j", "o") == -1
    commit({JOB_ID: "j", OPERATOR_ID: "o", MAX_COMMITTED_CHECKPOINT_ID: "4"})
    commit({JOB_ID: "j", OPERATOR_ID: "other", MAX_COMMITTED_CHECKPOINT_ID: "9"})
    commit({JOB_ID: "k", OPERATOR_ID: "o", MAX_COMMITTED_CHECKPOINT_ID: "7"})
    commit({"someone": "else"})
    meta = table.refresh().metadata
    assert committed_watermark(meta, "j", "o") == 4
    assert committed_watermark(meta, "j", "other") == 9
    assert committed_watermark(meta, "k", "o") == 7
    assert committed_watermark(meta, "new-query", "o") == -1
