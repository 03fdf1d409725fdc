"""The machine line every bench opens with carries a CPU probe: on this VM the CPU's speed
varies with its host's load, so a figure is comparable only beside the probe of its run."""

from __future__ import annotations

import re

import pytest

from bench import machine


def test_the_machine_line_names_the_cpu_probe_of_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "cpu_probe_ms", lambda rounds=5: 61.25)
    assert re.fullmatch(r"\S+ \d+ cores, Python 3\.\d+\.\d+, CPU probe 61\.2 ms", machine.describe())


def test_the_cpu_probe_is_the_median_of_its_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    # Five rounds whose CPU times are 10, 50, 20, 40, 30 ms: the median, 30 ms, not the mean.
    ticks = iter([0.0, 0.010, 1.0, 1.050, 2.0, 2.020, 3.0, 3.040, 4.0, 4.030])
    monkeypatch.setattr(machine.time, "process_time", lambda: next(ticks))
    assert machine.cpu_probe_ms(rounds=5) == pytest.approx(30.0)
