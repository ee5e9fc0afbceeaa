"""The episode table: schema, byte determinism, readers, and errors that name the file."""

from __future__ import annotations

import hashlib

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

from grpo_probe.envs.boat import BoatPushEnv, run_episode
from grpo_probe.envs.boat.params import SimParams
from grpo_probe.envs.episode_table import EPISODE_SCHEMA, read_episode_table, write_episode_table


@pytest.fixture(scope="module")
def records():
    params = SimParams(replans=3)
    env = BoatPushEnv(params)
    from grpo_probe.envs.boat.expert import ScriptedExpert

    expert = ScriptedExpert(params, noise=0.05)
    return [run_episode(env, s, lambda o, k, s=s: expert.act(o, (0, s, k))) for s in range(3)]


def test_table_bytes_depend_only_on_the_rows(tmp_path, records) -> None:
    write_episode_table(tmp_path / "a.parquet", records)
    write_episode_table(tmp_path / "b.parquet", records)
    digest = [hashlib.sha256((tmp_path / n).read_bytes()).hexdigest() for n in ("a.parquet", "b.parquet")]
    assert digest[0] == digest[1]


def test_pandas_and_duckdb_read_the_table(tmp_path, records) -> None:
    path = tmp_path / "episodes.parquet"
    write_episode_table(path, records)
    frame = pd.read_parquet(path)
    assert list(frame.columns) == EPISODE_SCHEMA.names
    assert frame["progress_final_cm"].tolist() == [r.progress_final_cm for r in records]
    n = duckdb.sql(f"SELECT sum(len(distance_trace_cm)) FROM '{path}'").fetchall()[0][0]
    assert n == sum(r.n_ticks + 1 for r in records)


def test_table_round_trips_every_field(tmp_path, records) -> None:
    path = tmp_path / "episodes.parquet"
    write_episode_table(path, records)
    assert read_episode_table(path).to_pylist() == [r.to_row() for r in records]


def test_truncated_table_is_an_error_naming_the_file(tmp_path, records) -> None:
    path = tmp_path / "episodes.parquet"
    write_episode_table(path, records)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match=r"episodes\.parquet"):
        read_episode_table(path)


def test_missing_column_is_an_error_naming_file_and_column(tmp_path, records) -> None:
    path = tmp_path / "episodes.parquet"
    write_episode_table(path, records)
    import pyarrow.parquet as pq

    pq.write_table(pq.read_table(path).drop(["final_z_mm"]), path)
    with pytest.raises(ValueError, match=r"episodes\.parquet: missing column 'final_z_mm'"):
        read_episode_table(path)


def test_a_row_without_a_field_is_refused_before_writing(tmp_path) -> None:
    path = tmp_path / "episodes.parquet"
    with pytest.raises(ValueError, match="lacks column"):
        write_episode_table(path, [{"seed": 1}])
    assert not path.exists()


def test_null_first_contact_keeps_its_integer_type(tmp_path, records) -> None:
    path = tmp_path / "episodes.parquet"
    write_episode_table(path, records)
    assert read_episode_table(path).schema.field("first_contact_tick").type == pa.int32()
