"""Adversarial answers: a program must score only by computing correct results.

Every attack below targets the test machinery instead of the task -- exiting early, forging
or reaching the judge's report, patching what the tests rely on, reading the tests, or
returning objects that rig comparisons -- in both harness kinds. None may pass a single
case; the honest answer next to them must.
"""

from __future__ import annotations

import pytest

from agon_env.envs.tasks.code_checks import IOCase, check_asserts, check_stdio
from agon_env.sandbox import Limits, sandbox_mode

pytestmark = pytest.mark.skipif(sandbox_mode() is None, reason="needs the bubblewrap sandbox")

LIMITS = Limits(cpu_s=4, wall_s=10.0)
TESTS = ["assert add(2, 3) == 5", "assert add(10, -4) == 6", "assert add(0, 0) == 0"]
HONEST = "def add(a, b):\n    return a + b"

ASSERT_ATTACKS = {
    "exit before any test": "import os\nos._exit(0)",
    "sys.exit inside the function": "import sys\ndef add(a, b):\n    sys.exit(0)",
    "exit 0 from the function": "import os\ndef add(a, b):\n    os._exit(0)",
    "kill the judge": "import os, signal\ndef add(a, b):\n    os.kill(os.getppid(), signal.SIGKILL)",
    "print forged reports": (
        # Walk every frame for the report nonce and a writable stream, and forge a pass per case.
        "import os, re, sys\n"
        "seen = [sys._getframe()]\n"
        "while seen[-1].f_back is not None:\n"
        "    seen.append(seen[-1].f_back)\n"
        "values = [v for f in seen for v in f.f_locals.values()]\n"
        "nonces = [v for v in values if isinstance(v, str) and re.fullmatch('[0-9a-f]{32}', v)]\n"
        "streams = [v for v in values if hasattr(v, 'write') and hasattr(v, 'flush')]\n"
        "for n in nonces:\n"
        "    for w in streams + [sys.stdout, sys.__stdout__]:\n"
        "        for i in range(3):\n"
        '            w.write(\'%s ["start", %d]\\n%s ["case", %d, "passed", ""]\\n\' % (n, i, n, i))\n'
        "        w.write('%s [\"done\"]\\n' % n)\n"
        "        w.flush()\n"
        "os._exit(0)"
    ),
    "write to the judge's stdout": (
        "import os\n"
        "def add(a, b):\n"
        "    with open('/proc/%d/fd/1' % os.getppid(), 'w') as f:\n"
        "        f.write('x [\"done\"]\\n')\n"
        "    os._exit(0)"
    ),
    "read the judge's memory": (
        "import os\ndef add(a, b):\n    open('/proc/%d/mem' % os.getppid(), 'rb').read(1)\n    return 0"
    ),
    "read the tests from memory": (
        # Find the test snippets in any frame and return the expected value they compare with.
        "import re, sys\n"
        "def add(a, b):\n"
        "    f = sys._getframe()\n"
        "    while f is not None:\n"
        "        for v in list(f.f_locals.values()):\n"
        "            for text in (v if isinstance(v, (list, dict)) else [v]):\n"
        "                text = str(text)\n"
        "                m = re.search(r'add\\(%d, %d\\) == (-?\\d+)' % (a, b), text)\n"
        "                if m:\n"
        "                    return int(m.group(1))\n"
        "        f = f.f_back\n"
        "    return None"
    ),
    "rigged __eq__": (
        "class Any:\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    __hash__ = object.__hash__\n"
        "def add(a, b):\n"
        "    return Any()"
    ),
    "int subclass with rigged __eq__": (
        "class Int(int):\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    __hash__ = int.__hash__\n"
        "def add(a, b):\n"
        "    return Int(0)"
    ),
    "patch builtins and the assert machinery": (
        "import builtins, sys\n"
        "builtins.AssertionError = type('Never', (Exception,), {})\n"
        'sys.modules[\'json\'].dumps = lambda *a, **k: \'["case", 0, "passed", ""]\'\n'
        "def add(a, b):\n"
        "    return 0"
    ),
    "trace away the failing comparison": (
        "import sys\nsys.settrace(lambda *a: None)\ndef add(a, b):\n    return -1"
    ),
    "stop the judge": "import os, signal\ndef add(a, b):\n    os.kill(os.getppid(), signal.SIGSTOP)",
}


def test_the_honest_answer_passes_both_harness_kinds():
    assert check_asserts(HONEST, TESTS, limits=LIMITS).all_passed
    program = "a, b = map(int, input().split())\nprint(a + b)"
    assert check_stdio(program, [IOCase("2 3", "5"), IOCase("10 -4", "6")], LIMITS).all_passed


@pytest.mark.parametrize("attack", sorted(ASSERT_ATTACKS))
def test_no_assert_harness_attack_passes_a_case(attack):
    report = check_asserts(ASSERT_ATTACKS[attack], TESTS, limits=Limits(cpu_s=3, wall_s=4.0))
    assert report.n_passed == 0, report


def test_humaneval_style_check_function_is_not_fooled():
    check = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(1, 1) == 2\n"
    tests = [check + "\ncheck(add)"]
    assert check_asserts(HONEST, tests, limits=LIMITS).all_passed
    for attack in (
        "rigged __eq__",
        "read the tests from memory",
        "exit before any test",
        "print forged reports",
    ):
        assert not check_asserts(ASSERT_ATTACKS[attack], tests, limits=LIMITS).all_passed, attack


def test_program_objects_work_but_cannot_be_compared():
    # MBPP builds trees from the program's own class in its setup code: that must keep working...
    program = (
        "class Node:\n    def __init__(self, v):\n        self.v, self.left = v, None\n"
        "def depth(n):\n    return 0 if n is None else 1 + depth(n.left)"
    )
    setup = "root = Node(1)\nroot.left = Node(2)"
    assert check_asserts(
        program, ["assert depth(root) == 2", "assert root.left.v == 2"], setup, LIMITS
    ).all_passed
    # ...but an object's own __eq__ never decides a test.
    assert check_asserts(program, ["assert Node(1) == Node(1)"], setup, LIMITS).n_passed == 0


STDIO_CASES = [IOCase("2 3", "5"), IOCase("10 -4", "6")]
STDIO_ATTACKS = {
    "exit at once": "import os\nos._exit(0)",
    "echo the input": "print(input())",
    "answer on stderr": "import sys\nsys.stderr.write('5\\n6\\n')",
    "look for expected output files": (
        "import glob\n"
        "for f in glob.glob('/**/*', recursive=True):\n"
        "    try:\n"
        "        text = open(f).read()\n"
        "    except Exception:\n"
        "        continue\n"
        "    if 'IOCase' in text or 'expected' in text:\n"
        "        print(text[:100])\n"
        "        break"
    ),
    "kill the process group": "import os, signal\nprint(5)\nos.killpg(0, signal.SIGKILL)",
    "flood the output": "print('5 ' * 10**7)",
}


@pytest.mark.parametrize("attack", sorted(STDIO_ATTACKS))
def test_no_stdio_harness_attack_passes_a_case(attack):
    report = check_stdio(STDIO_ATTACKS[attack], STDIO_CASES, Limits(cpu_s=3, wall_s=6.0), fail_fast=False)
    assert report.n_passed == 0, report


def test_the_judge_is_out_of_the_programs_reach():
    # The probe answers right only while every way into the judge process is refused.
    probe = (
        "import os\n"
        "def add(a, b):\n"
        "    judge = os.getppid()\n"
        "    for path, mode in (('/proc/%d/mem' % judge, 'rb'), ('/proc/%d/fd/1' % judge, 'w')):\n"
        "        try:\n"
        "            open(path, mode).close()\n"
        "            return None\n"
        "        except OSError:\n"
        "            pass\n"
        "    return a + b"
    )
    report = check_asserts(probe, TESTS, limits=LIMITS)
    assert report.all_passed, report
