"""A finished run's records read back from the store by its id or a short prefix (src/tracking/records.py), and
the one-line refusals that name the flag or config key the id came from."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from src.common.errors import UserError
from src.core.records import RECORDS_FILE
from src.tracking import records, store


@pytest.fixture
def runs(tmp_path, empty_mlflow_db):
    """(store uri, a run that logged its records, a run that logged none, the records)."""
    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = store.client(uri)
    exp = store.experiment_id(client, "records", uri)
    with_records, without = (client.create_run(exp).info.run_id for _ in range(2))
    table = pd.DataFrame({"question_id": ["q1", "q2"], "parsed_label": ["A", None]})
    table.to_parquet(tmp_path / RECORDS_FILE)
    client.log_artifact(with_records, str(tmp_path / RECORDS_FILE))
    return uri, with_records, without, table


def test_a_runs_records_are_read_by_its_id_or_its_short_prefix(runs):
    uri, with_records, _, table = runs
    pd.testing.assert_frame_equal(records.read_run_records(with_records, uri), table)
    pd.testing.assert_frame_equal(records.read_run_records(with_records[: records.SHORT_ID_LENGTH], uri), table)


@pytest.mark.parametrize(
    ("key", "named"), [(None, "--run"), ("--diff", "--diff"), ("variants.source_run", "config key variants.source_run")]
)
def test_a_missing_run_or_records_is_one_line_naming_where_the_id_came_from(runs, key, named):
    uri, _, without, _ = runs
    given = {} if key is None else {"key": key}
    with pytest.raises(UserError) as caught:
        records.read_run_records("nope", uri, **given)
    assert str(caught.value).startswith(f"{named}: no MLflow run 'nope' at {uri}; ")
    with pytest.raises(UserError) as caught:
        records.read_run_records(without, uri, **given)
    assert str(caught.value) == (
        f"{named}: run {without} has no {RECORDS_FILE} artifact; give a run of src.run that finished"
    )


def test_an_artifact_is_downloaded_into_the_folder_asked_for(runs, tmp_path):
    uri, with_records, without, _ = runs
    folder = tmp_path / "into"
    folder.mkdir()
    path = records.download_artifact(with_records, RECORDS_FILE, folder, uri, missing="none")
    assert path == folder / RECORDS_FILE and path.is_file()
    with pytest.raises(UserError, match="^the run has no such file$"):
        records.download_artifact(without, RECORDS_FILE, folder, uri, missing="the run has no such file")


def runs_sharing_a_prefix(uri: str, db, prefix: str, n: int = 3) -> list[str]:
    """`n` runs whose ids start with `prefix` (the store's rows renamed: MLflow's own ids are random)."""
    import sqlite3

    client = store.client(uri)
    exp = store.experiment_id(client, "prefixes", uri)
    ids = [client.create_run(exp).info.run_id for _ in range(n)]
    conn = sqlite3.connect(db)
    with conn:
        for run_id in ids:
            new = prefix + run_id[len(prefix) :]
            for table in ("runs", "tags", "params", "metrics", "latest_metrics"):
                conn.execute(f"UPDATE {table} SET run_uuid = ? WHERE run_uuid = ?", (new, run_id))
    conn.close()
    return [prefix + run_id[len(prefix) :] for run_id in ids]


def test_a_prefix_of_several_runs_is_refused_naming_two_of_them_and_asking_for_more(runs, tmp_path):
    uri = runs[0]
    shared = runs_sharing_a_prefix(uri, tmp_path / "mlflow.db", "abcdef01", n=3)
    with pytest.raises(UserError) as caught:
        records.resolve_run_id("abcdef01", uri)
    message = str(caught.value)
    named = [run_id for run_id in shared if run_id in message]
    assert len(named) == 2  # three match: two are named, then "..."
    assert message == (
        f"--run: 'abcdef01' is the start of several run ids at {uri} ({named[0]}, {named[1]}, ...); "
        "give more characters"
    ) or message == (
        f"--run: 'abcdef01' is the start of several run ids at {uri} ({named[1]}, {named[0]}, ...); "
        "give more characters"
    )
    first = shared[0]
    assert records.resolve_run_id(first[:12], uri) == first  # more characters: one run


def test_a_prefix_no_run_starts_with_and_one_too_short_are_refused_in_one_line(runs):
    uri, with_records, _, _ = runs
    unused = next(p for p in ("00000000", "ffffffff") if not with_records.startswith(p))
    with pytest.raises(UserError) as caught:
        records.resolve_run_id(unused, uri, key="--diff")
    assert str(caught.value) == (
        f"--diff: no MLflow run {unused!r} at {uri}, nor one whose id starts so; "
        "give the id of a finished run (--tracking-uri must point at its store)"
    )
    short = with_records[: records.SHORT_ID_LENGTH - 1]
    with pytest.raises(UserError) as caught:
        records.resolve_run_id(short, uri)
    assert str(caught.value) == (
        f"--run: no MLflow run {short!r} at {uri}; give the id of a finished run "
        f"or its first {records.SHORT_ID_LENGTH} or more characters (--tracking-uri must point at its store)"
    )


def test_an_id_is_read_with_the_blanks_around_it_and_the_runs_tags_come_back(runs):
    uri, with_records, _, _ = runs
    assert records.resolve_run_id(f"  {with_records}\n", uri) == with_records
    assert records.resolve_run_id(f" {with_records[:10]} ", uri) == with_records
    store.client(uri).set_tag(with_records, "model", "m1")
    assert records.run_tags(with_records, uri)["model"] == "m1"


def test_a_prefix_in_a_store_with_no_experiment_is_no_run(tmp_path, empty_mlflow_db):
    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    with pytest.raises(UserError, match="nor one whose id starts so"):
        records.resolve_run_id("abcdef01", uri)
