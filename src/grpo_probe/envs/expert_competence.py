"""What an environment's scripted expert achieves over seeds, and the episode and success radius that fit it.

Why: every reference arm is cloned on this expert's demonstrations, so a design whose episode ends before
the expert has done its task teaches the arms a task cut short (MetaWorld's drawer-open-v3 expert, in
push-v3's 80 ticks, touches the drawer on 13 of 16 seeds and opens it on none), and a success radius
the expert never meets makes ``success`` read zero whatever the arms do. The
shipped designs once tuned their episode length, replans and radius by hand from measurements no tool
made. Here the expert runs over seeds for longer than the design's episode (its chunk geometry kept:
the same chunk length and executed actions, more replans), with the noise and keys its demonstrations
use, and the distance trace of every episode says when it got there and whether it stayed.

The suggestions, each from the measured episodes alone (:func:`summarize`):

- **success radius**: twice the distance the expert holds the object within for four replans on end
  (its best such stretch; the 90th percentile over seeds), rounded up to the next half centimetre.
  Held, not the closest approach or where the episode ends: MetaWorld's drawer-open-v3 expert pulls the
  handle through the goal and on to 1.2 cm past it, where it stays (its closest approach, 0.1 cm, is a
  radius it never ends within), and its push-v3 expert brings the puck within 2 cm by tick 80 on every
  seed, holds it there, then pushes it on, 30 cm past the goal on some seeds by tick 320. Four replans,
  so an arm that arrives a little later or earlier than the expert still ends within it; twice, because
  the radius should hold an arm about as good as the expert, and a radius at the expert's own 90th
  percentile leaves a tenth of its seeds out by construction. A radius must leave half the way to go on
  every seed (at most half the nearest spawn distance), else success would hold at spawn: an expert that
  holds the object no nearer keeps the registered radius, and the report says so;
- **episode**: the 90th percentile over seeds of the tick from which the object is held within that
  radius (for four replans, or to the end), times 1.25 (the cloned arms are slower than the expert),
  rounded up to whole replans. The report gives the expert's success at the end of that episode, and
  says when it is below nine in ten (the expert moved the object away again).

Nothing here reads a design: ``grpo-probe expert DESIGN`` passes the design's environment, its
demonstrations' seeds and noise and its run key (:mod:`grpo_probe.provenance.design_command`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grpo_probe.envs.registry import EnvConfig, env_spec, is_builtin, make_env, make_expert

__all__ = [
    "EPISODE_MARGIN",
    "HOLD_REPLANS",
    "HORIZON_FACTOR",
    "RADIUS_CAP",
    "RADIUS_FACTOR",
    "RADIUS_STEP_M",
    "SUGGESTION_QUANTILE",
    "ExpertEpisode",
    "ExpertFit",
    "ExpertReport",
    "expert_episodes",
    "measure_expert",
    "report_lines",
    "summarize",
    "with_replans",
]

SUGGESTION_QUANTILE = 90
"""The percentile over seeds both suggestions read (an expert's worst tenth of seeds is left out)."""
RADIUS_FACTOR = 2.0
"""The suggested radius over the distance the expert holds at :data:`SUGGESTION_QUANTILE`."""
RADIUS_STEP_M = 0.005
"""The suggested radius is a whole number of these (half a centimetre), at least one."""
RADIUS_CAP = 0.5
"""The suggested radius is at most this share of the nearest spawn distance."""
HOLD_REPLANS = 4
"""The object is held within a radius when it stays there for this many replans' ticks on end."""
EPISODE_MARGIN = 1.25
"""The suggested episode over the expert's settling tick at :data:`SUGGESTION_QUANTILE`."""
HORIZON_FACTOR = 4
"""By default the expert runs this many times the design's replans, to see it settle."""


@dataclass(frozen=True)
class ExpertEpisode:
    """One seed's episode of the expert: its object-to-goal distance at spawn and after every tick."""

    seed: int
    distances_m: tuple[float, ...]
    first_contact_tick: int | None
    row: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The environment's record row (its own columns, guard channels included), for a caller that reads
    them."""

    @property
    def ticks(self) -> int:
        """Ticks the episode ran (it may end before the horizon: a time limit, a strike cap)."""
        return len(self.distances_m) - 1

    def distance_at(self, tick: int) -> float:
        """The distance after ``tick`` ticks, or at the episode's end if it ended sooner."""
        return self.distances_m[min(tick, self.ticks)]

    def first_within(self, radius_m: float) -> int | None:
        """The first tick at which the object is within ``radius_m`` of the goal (0: at spawn)."""
        return next((t for t, d in enumerate(self.distances_m) if d <= radius_m), None)

    def held_distance(self, ticks: int) -> float:
        """The least distance the object stays within for ``ticks`` ticks on end (the whole episode's
        largest distance when it is shorter)."""
        trace = self.distances_m
        if len(trace) <= ticks:
            return max(trace)
        return min(max(trace[t : t + ticks + 1]) for t in range(len(trace) - ticks))

    def held_within(self, radius_m: float, ticks: int) -> int | None:
        """The first tick from which the object stays within ``radius_m`` for ``ticks`` ticks, or to the
        episode's end when that comes sooner; None when it never does."""
        trace = self.distances_m
        return next((t for t in range(len(trace)) if max(trace[t : t + ticks + 1]) <= radius_m), None)

    def settled_within(self, radius_m: float) -> int | None:
        """The tick from which the object stays within ``radius_m`` to the episode's end; None when the
        episode ends outside it."""
        if self.distances_m[-1] > radius_m:
            return None
        tick = self.ticks
        while tick > 0 and self.distances_m[tick - 1] <= radius_m:
            tick -= 1
        return tick


def with_replans(config: EnvConfig, replans: int) -> EnvConfig:
    """``config`` with an episode of ``replans`` replans (its chunk geometry as it is); a ``ValueError``
    naming the environment when its params register no ``replans``."""
    if isinstance(replans, bool) or not isinstance(replans, int) or replans < 1:
        raise ValueError(f"replans must be a positive integer, got {replans!r}")
    if is_builtin(config.id):
        return dataclasses.replace(config, params=dataclasses.replace(config.params, replans=replans))
    if "replans" not in config.params:
        raise ValueError(
            f"{config.where}.params: {config.id!r} registers no replans, so its expert cannot be run for "
            "longer than its episode"
        )
    return dataclasses.replace(config, params={**config.params, "replans": replans})


def expert_episodes(
    config: EnvConfig, seeds: Sequence[int], noise: float, run_key: int = 0
) -> list[ExpertEpisode]:
    """The environment's scripted expert on every seed, its noise keyed by (run_key, seed, replan) as the
    demonstrations' is, each episode run to its end."""
    env = make_env(config)
    expert = make_expert(config, noise)
    executed = env.spec.executed_actions
    found = []
    try:
        for seed in seeds:
            obs = env.reset(int(seed))
            while not env.done:
                obs = env.execute(expert.act(obs, (run_key, int(seed), env.replan_index)), executed)
            row = env.record().to_row()
            found.append(
                ExpertEpisode(
                    seed=int(seed),
                    distances_m=tuple(d / 100.0 for d in row["distance_trace_cm"]),
                    first_contact_tick=row["first_contact_tick"],
                    row=row,
                )
            )
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            close()
    return found


@dataclass(frozen=True)
class ExpertFit:
    """The expert's episodes read at one episode length and one success radius."""

    replans: int
    ticks: int
    radius_m: float
    success: float
    """The share of seeds whose object ends the episode within the radius (the record's ``success``)."""
    mean_progress_cm: float
    """The mean over seeds of ``progress_final_cm``: 100 (spawn distance - distance at the episode's end)."""
    engagement: float
    """The share of seeds engaged at some tick of the episode (the record's ``contact``)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as the JSON report holds it."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ExpertReport:
    """What the expert achieved over its seeds, at the design's episode and at the suggested one."""

    seeds: tuple[int, ...]
    noise: float
    run_key: int
    executed_actions: int
    horizon_replans: int
    registered: ExpertFit
    suggested: ExpertFit
    reach_ticks: tuple[int | None, ...]
    """Per seed, the first tick within the suggested radius (None: never)."""
    hold_ticks: tuple[int | None, ...]
    """Per seed, the first tick from which it stays within the suggested radius for :data:`HOLD_REPLANS`
    replans (or to the end; None: never)."""
    settle_ticks: tuple[int | None, ...]
    """Per seed, the tick from which it stays within the suggested radius (None: it ends outside)."""
    first_contact_ticks: tuple[int | None, ...]
    spawn_cm: tuple[float, ...]
    held_cm: tuple[float, ...]
    """Per seed, the least distance the object stays within for :data:`HOLD_REPLANS` replans on end."""
    final_cm: tuple[float, ...]
    """Per seed, the distance at the end of its longest episode."""
    notes: tuple[str, ...] = ()

    @property
    def horizon_ticks(self) -> int:
        return self.horizon_replans * self.executed_actions

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``: the two fits, the tick percentiles and every seed's numbers."""
        return {
            "seeds": list(self.seeds),
            "noise": self.noise,
            "run_key": self.run_key,
            "executed_actions": self.executed_actions,
            "horizon": {"replans": self.horizon_replans, "ticks": self.horizon_ticks},
            "registered": self.registered.to_dict(),
            "suggested": self.suggested.to_dict(),
            "ticks": {
                "reach": _quantiles(self.reach_ticks),
                "hold": _quantiles(self.hold_ticks),
                "settle": _quantiles(self.settle_ticks),
                "first_contact": _quantiles(self.first_contact_ticks),
            },
            "per_seed": [
                {
                    "seed": seed,
                    "spawn_cm": spawn,
                    "held_cm": held,
                    "final_cm": final,
                    "reach_tick": reach,
                    "hold_tick": hold,
                    "settle_tick": settle,
                    "first_contact_tick": contact,
                }
                for seed, spawn, held, final, reach, hold, settle, contact in zip(
                    self.seeds,
                    self.spawn_cm,
                    self.held_cm,
                    self.final_cm,
                    self.reach_ticks,
                    self.hold_ticks,
                    self.settle_ticks,
                    self.first_contact_ticks,
                    strict=True,
                )
            ],
            "notes": list(self.notes),
        }


def _quantile(values: Sequence[float], percent: float) -> float:
    """The ``percent`` percentile of ``values``, an observed value (NumPy's ``higher`` method)."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), percent, method="higher"))


def _quantiles(ticks: Sequence[int | None]) -> dict[str, Any]:
    """The median and 90th percentile of the seeds' ticks, a seed that never got there counted as never
    (None when more than that share of seeds never did); and how many seeds got there."""
    reached = [t for t in ticks if t is not None]
    as_numbers = [math.inf if t is None else float(t) for t in ticks]

    def at(percent: float) -> int | None:
        if not as_numbers:
            return None
        value = _quantile(as_numbers, percent)
        return None if math.isinf(value) else int(value)

    return {"median": at(50), "p90": at(SUGGESTION_QUANTILE), "seeds": len(reached), "of": len(ticks)}


def _fit(episodes: Sequence[ExpertEpisode], replans: int, executed: int, radius_m: float) -> ExpertFit:
    ticks = replans * executed
    ends = [e.distance_at(ticks) for e in episodes]
    return ExpertFit(
        replans=replans,
        ticks=ticks,
        radius_m=radius_m,
        success=float(np.mean([d <= radius_m for d in ends])),
        mean_progress_cm=float(
            np.mean([100.0 * (e.distances_m[0] - d) for e, d in zip(episodes, ends, strict=True)])
        ),
        engagement=float(
            np.mean([e.first_contact_tick is not None and e.first_contact_tick <= ticks for e in episodes])
        ),
    )


def suggested_radius(held_m: Sequence[float]) -> float:
    """Twice the held distance at :data:`SUGGESTION_QUANTILE`, rounded up to a whole :data:`RADIUS_STEP_M`
    (at least one)."""
    wanted = RADIUS_FACTOR * _quantile(held_m, SUGGESTION_QUANTILE)
    steps = max(1, math.ceil(round(wanted / RADIUS_STEP_M, 9)))
    return round(steps * RADIUS_STEP_M, 6)


def summarize(
    episodes: Sequence[ExpertEpisode],
    *,
    noise: float,
    run_key: int,
    executed_actions: int,
    horizon_replans: int,
    registered_replans: int,
    registered_radius_m: float,
) -> ExpertReport:
    """The expert's fit at the registered episode and radius, the suggested ones and the fit there."""
    if not episodes:
        raise ValueError("the expert ran no episode: give it one seed at least")
    hold = HOLD_REPLANS * executed_actions
    held = [e.held_distance(hold) for e in episodes]
    spawn = [e.distances_m[0] for e in episodes]
    radius, notes = suggested_radius(held), []
    if radius > RADIUS_CAP * min(spawn):
        nearest = 100 * _quantile(held, SUGGESTION_QUANTILE)
        notes.append(
            f"the expert holds the object no nearer the goal than {nearest:.2f} cm ({HOLD_REPLANS} replans "
            "on end, 90th percentile over seeds), too far for a radius that leaves half the way to go from "
            f"the nearest spawn ({100 * min(spawn):.2f} cm): the registered radius is kept"
        )
        radius = registered_radius_m
    reach = tuple(e.first_within(radius) for e in episodes)
    arrive = tuple(e.held_within(radius, hold) for e in episodes)
    settle = tuple(e.settled_within(radius) for e in episodes)
    arriving = _quantiles(arrive)["p90"]
    if arriving is None:
        replans = horizon_replans
        notes.append(
            f"the object is held within {100 * radius:g} cm on only {sum(t is not None for t in arrive)} of "
            f"{len(arrive)} seeds in {horizon_replans} replans: the suggested episode is all of them; "
            "measure longer (--replans) to see when it gets there"
        )
    else:
        wanted = math.ceil(round(EPISODE_MARGIN * max(arriving, 1), 9))
        replans = max(1, math.ceil(wanted / executed_actions))
    suggested = _fit(episodes, replans, executed_actions, radius)
    if arriving is not None and suggested.success < SUGGESTION_QUANTILE / 100:
        notes.append(
            f"at the end of the suggested episode the object is within {100 * radius:g} cm on "
            f"{suggested.success:.2f} of seeds: the expert moves it away again after reaching it"
        )
    if any(e.ticks < horizon_replans * executed_actions for e in episodes):
        shortest = min(e.ticks for e in episodes)
        notes.append(f"some episodes ended before the horizon (the shortest after {shortest} ticks)")
    return ExpertReport(
        seeds=tuple(e.seed for e in episodes),
        noise=noise,
        run_key=run_key,
        executed_actions=executed_actions,
        horizon_replans=horizon_replans,
        registered=_fit(episodes, registered_replans, executed_actions, registered_radius_m),
        suggested=suggested,
        reach_ticks=reach,
        hold_ticks=arrive,
        settle_ticks=settle,
        first_contact_ticks=tuple(e.first_contact_tick for e in episodes),
        spawn_cm=tuple(100.0 * d for d in spawn),
        held_cm=tuple(100.0 * d for d in held),
        final_cm=tuple(100.0 * e.distances_m[-1] for e in episodes),
        notes=tuple(notes),
    )


def measure_expert(
    config: EnvConfig, seeds: Sequence[int], noise: float, run_key: int = 0, replans: int | None = None
) -> ExpertReport:
    """Run the expert of ``config``'s environment on ``seeds`` for ``replans`` replans (default
    :data:`HORIZON_FACTOR` times the registered ones) and summarize it against the registered episode and
    success radius. An environment whose params register no ``replans`` is measured over its own episode
    (asking it for ``replans`` is an error)."""
    spec = env_spec(config)
    horizon = HORIZON_FACTOR * spec.replans if replans is None else replans
    notes = []
    try:
        longer = with_replans(config, horizon)
    except ValueError as exc:
        if replans is not None:
            raise
        longer, horizon = config, spec.replans
        notes.append(f"{exc}: measured over its own {spec.replans} replans")
    episodes = expert_episodes(longer, seeds, noise, run_key)
    report = summarize(
        episodes,
        noise=noise,
        run_key=run_key,
        executed_actions=spec.executed_actions,
        horizon_replans=horizon,
        registered_replans=spec.replans,
        registered_radius_m=spec.view.target_radius_m,
    )
    return dataclasses.replace(report, notes=(*notes, *report.notes))


def _ticks_text(ticks: Sequence[int | None]) -> str:
    found = _quantiles(ticks)
    if not found["seeds"]:
        return f"never (0 of {found['of']} seeds)"
    median, p90 = (("never" if v is None else str(v)) for v in (found["median"], found["p90"]))
    return f"{median}, {p90} ({found['seeds']} of {found['of']} seeds)"


def report_lines(report: ExpertReport) -> list[str]:
    """The report as a Markdown table and the ticks below it, as ``grpo-probe expert`` prints it."""
    fits = (report.registered, report.suggested)
    executed = report.executed_actions

    def row(label: str, cell: Any) -> str:
        return f"| {label} | " + " | ".join(cell(f) for f in fits) + " |"

    radius = f"{100 * report.suggested.radius_m:g} cm"
    lines = [
        "| | as registered | suggested |",
        "|---|---|---|",
        row("episode", lambda f: f"{f.replans} replans x {executed} = {f.ticks} ticks"),
        row("success radius", lambda f: f"{100 * f.radius_m:g} cm"),
        row("expert success", lambda f: f"{f.success:.2f}"),
        row("expert mean progress", lambda f: f"{f.mean_progress_cm:.2f} cm"),
        row("expert engagement", lambda f: f"{f.engagement:.2f}"),
        "",
        f"ticks (median, 90th percentile) over {len(report.seeds)} seeds, in up to {report.horizon_ticks}:",
        f"- first engaged: {_ticks_text(report.first_contact_ticks)}",
        f"- first within {radius}: {_ticks_text(report.reach_ticks)}",
        f"- within {radius} for {HOLD_REPLANS} replans from: {_ticks_text(report.hold_ticks)}",
        f"- within {radius} from then on to the end: {_ticks_text(report.settle_ticks)}",
    ]
    lines += [f"note: {note}" for note in report.notes]
    return lines
