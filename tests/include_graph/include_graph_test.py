#!/usr/bin/env python3
"""include_graph.py fails on what it must refuse: planted trees, checked by its exit status and
the files its message names."""

import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include_graph.py")


def plant(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)


def run(root, *args):
    done = subprocess.run([sys.executable, SCRIPT, "--root", root, *args],
                          capture_output=True, text=True, check=False)
    return done.returncode, done.stdout + done.stderr


# A sound little tree: support below planning, a plugin that sees only the ABI.
SOUND = {
    "core/include/ninfer/abi/plugin_abi.h": "#pragma once\n",
    "core/include/ninfer/support/error.hpp": "#pragma once\n#include <string>\n",
    "core/include/ninfer/planning/planner.hpp":
        '#pragma once\n#include "ninfer/abi/plugin_abi.h"\n#include "ninfer/support/error.hpp"\n',
    "core/planning/planner.cpp": '#include "ninfer/planning/planner.hpp"\n#include "local.hpp"\n',
    "core/planning/local.hpp": "#pragma once\n",
    "core/support/error.cpp": '#include "ninfer/support/error.hpp"\n',
    "plugins/cpu/ops.cpp": '#include "ninfer/abi/plugin_abi.h"\n#include "helpers.hpp"\n',
    "plugins/cpu/helpers.hpp": "#pragma once\n",
}


class IncludeGraphTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        plant(self.root, SOUND)

    def tearDown(self):
        self.tmp.cleanup()

    def test_sound_tree_passes_and_prints_its_graph(self):
        rc, out = run(self.root)
        self.assertEqual(rc, 0, out)
        rc, out = run(self.root, "--graph")
        self.assertEqual(rc, 0, out)
        self.assertIn("planning -> abi, support", out)
        self.assertIn("support -> (nothing)", out)
        self.assertIn("plugins/cpu -> abi", out)
        rc, out = run(self.root, "--dot")
        self.assertEqual(rc, 0, out)
        self.assertIn('"planning" -> "support"', out)

    def test_planted_cycle_fails_naming_both_files(self):
        plant(self.root, {"core/support/error.cpp":
                          '#include "ninfer/support/error.hpp"\n#include "ninfer/planning/planner.hpp"\n'})
        rc, out = run(self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("include cycle between core modules planning, support", out)
        self.assertIn("support -> planning: core/support/error.cpp -> ninfer/planning/planner.hpp", out)
        self.assertIn("planning -> support: core/include/ninfer/planning/planner.hpp -> "
                      "ninfer/support/error.hpp", out)

    def test_cycle_through_three_modules_is_found(self):
        plant(self.root, {
            "core/include/ninfer/devices/device.hpp": '#include "ninfer/planning/planner.hpp"\n',
            "core/include/ninfer/support/error.hpp": '#include "ninfer/devices/device.hpp"\n',
        })
        rc, out = run(self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("include cycle between core modules devices, planning, support", out)

    def test_planted_plugin_includes_fail_naming_the_file(self):
        plant(self.root, {
            "plugins/cuda/kernels/gemv.cu":
                '#include "../../../core/planning/local.hpp"\n#include "ninfer/abi/plugin_abi.h"\n',
            "plugins/cpu/ops.cpp": '#include <ninfer/planning/planner.hpp>\n',
        })
        rc, out = run(self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("plugins/cuda/kernels/gemv.cu -> ../../../core/planning/local.hpp: "
                      "a plugin reaches into core/ by a relative path", out)
        self.assertIn("plugins/cpu/ops.cpp -> ninfer/planning/planner.hpp: "
                      "a plugin includes a core header outside ninfer/abi/", out)
        self.assertNotIn("ninfer/abi/plugin_abi.h:", out)

    def test_loose_core_header_fails(self):
        plant(self.root, {"core/include/ninfer/loose.hpp": "#pragma once\n"})
        rc, out = run(self.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("core/include/ninfer/loose.hpp: a core header outside any module folder", out)

    def test_allow_list_admits_exactly_the_named_pairs(self):
        plant(self.root, {
            "core/support/error.cpp":
                '#include "ninfer/support/error.hpp"\n#include "ninfer/planning/planner.hpp"\n',
            "plugins/cuda/kernels/gemv.cu": '#include "../../../core/planning/local.hpp"\n',
        })
        known = ["--allow", "core/support/error.cpp -> ninfer/planning/planner.hpp",
                 "--allow", "plugins/cuda/kernels/gemv.cu -> ../../../core/planning/local.hpp"]
        rc, out = run(self.root, *known)
        self.assertEqual(rc, 0, out)
        # A second path into the same cycle is not covered by the first one's entry.
        plant(self.root, {"core/support/log.cpp": '#include "ninfer/planning/planner.hpp"\n'})
        rc, out = run(self.root, *known)
        self.assertEqual(rc, 1, out)
        self.assertIn("support -> planning: core/support/log.cpp -> ninfer/planning/planner.hpp", out)
        self.assertNotIn("core/support/error.cpp -> ninfer", out)

    def test_stale_allow_entry_fails(self):
        rc, out = run(self.root, "--allow", "core/jit/gone.cpp -> ninfer/x/y.hpp")
        self.assertEqual(rc, 1, out)
        self.assertIn("allow-list entry 'core/jit/gone.cpp -> ninfer/x/y.hpp' matches nothing", out)


if __name__ == "__main__":
    unittest.main()
