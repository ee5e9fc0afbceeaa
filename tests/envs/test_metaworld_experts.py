"""Every MetaWorld v3 task that ships a scripted expert serves: its scene and expert step a few ticks.

Why: a design names a MetaWorld task by ``env.params.gym_id`` and nothing else, and the scene's expert is
looked up from it. The expert was once found by a class name built from the task's name, which MetaWorld
does not always follow (``peg-insert-side-v3`` is ``SawyerPegInsertionSideV3Policy``), so a design that
locked cleanly failed at its first demonstration. The experts are now taken from MetaWorld's own registry
(``metaworld.policies.ENV_POLICY_MAP``); this test runs, in MetaWorld's own environment, every task that
registry lists through the server's factory and scene for a few ticks, peg-insert-side included.

Opt-in like the other served-simulator tests (``GRPO_PROBE_SIM_VENV=1``, which `.ci/run` sets): it builds
or reuses .venvs/metaworld (tools/make_sim_venv.sh).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from serve_processes import sim_venv_python

pytestmark = [pytest.mark.slow]

_EVERY_TASK = """
import json, numpy as np
from metaworld.policies import ENV_POLICY_MAP
from grpo_probe.serve.metaworld_env import make, scene
stepped, failed = {}, {}
for task in sorted(ENV_POLICY_MAP):
    try:
        env = make(task, max_episode_steps=20)
        obs, _ = env.reset(seed=3)
        expert = scene(env)
        moved = 0.0
        for tick in range(3):
            chunk = expert.expert_chunk(obs, (7, tick), 0.0, 4)
            start = np.asarray(obs, dtype=np.float64).copy()
            obs, *_ = env.step(chunk[0])
            moved += float(np.abs(np.asarray(obs, dtype=np.float64) - start).sum())
        stepped[task] = moved
    except Exception as exc:
        failed[task] = f"{type(exc).__name__}: {exc}"
refused = {}
for name in ("not-a-task-v3", "drawer-opne-v3"):
    try:
        make(name)
    except ValueError as exc:
        refused[name] = str(exc)
print(json.dumps({"stepped": stepped, "failed": failed, "refused": refused}))
"""


def test_every_metaworld_task_with_an_expert_serves_a_few_ticks() -> None:
    python = sim_venv_python("metaworld")
    done = subprocess.run(
        [python, "-c", _EVERY_TASK], capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert not found["failed"], found["failed"]
    stepped = found["stepped"]
    assert "peg-insert-side-v3" in stepped and len(stepped) >= 45, sorted(stepped)
    assert all(moved > 0 for moved in stepped.values()), stepped  # each expert's action moved the arm
    unknown, typo = found["refused"]["not-a-task-v3"], found["refused"]["drawer-opne-v3"]
    assert unknown.startswith("env.params.gym_id: MetaWorld has no task 'not-a-task-v3' (its ")
    assert all(task in unknown for task in stepped)  # the refusal lists the tasks
    assert "no task 'drawer-opne-v3'; did you mean 'drawer-open-v3'?" in typo


_ENGAGEMENT = """
import json, numpy as np
from grpo_probe.serve.metaworld_env import make, scene
found = {}
for task in ("drawer-open-v3", "push-v3", "door-open-v3", "reach-v3"):
    env = make(task, max_episode_steps=200)
    view = scene(env)
    if not callable(getattr(view, "engaged", None)):
        found[task] = None
        continue
    env.reset(seed=1)
    spawn = np.asarray(view.positions()["object_xy"])
    held = []
    for _ in range(30):  # the arm held still: nothing touched
        _, _, _, _, info = env.step(np.zeros(4, np.float32))
        held.append(view.engaged(info))
    still = float(np.hypot(*(np.asarray(view.positions()["object_xy"]) - spawn)))
    obs, _ = env.reset(seed=1)
    first = None
    for tick in range(1, 151):
        obs, _, _, _, info = env.step(view.expert_chunk(obs, (0, 1, tick), 0.0, 1)[0])
        if view.engaged(info):
            first = tick
            break
    found[task] = {"held": any(held), "still_m": still, "first": first, "text": view.engagement}
print(json.dumps(found))
"""


def test_metaworld_engagement_is_the_arms_contact_and_the_spawn_is_where_the_object_is() -> None:
    """With the arm held still nothing is engaged and the object has not moved from the spawn the scene
    read (drawer-open's drawer was read where the last episode left it before the scene brought the state
    forward); under the expert the arm touches the object within 150 ticks; reach offers no engagement."""
    python = sim_venv_python("metaworld")
    done = subprocess.run(
        [python, "-c", _ENGAGEMENT], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found.pop("reach-v3") is None
    for task, seen in found.items():
        assert not seen["held"] and seen["still_m"] < 1e-3, (task, seen)
        assert seen["first"] is not None and seen["first"] > 1, (task, seen)
        assert seen["text"].startswith("a link of the Sawyer arm"), (task, seen)
