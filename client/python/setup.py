"""Only what pyproject.toml cannot say: kcache_torch_autoenable.pth goes to
the root of the wheel, so that installing the package puts it in
site-packages, where Python reads .pth files at start-up (KCACHE_TORCH=1)."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "kcache_torch_autoenable.pth"


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        self.copy_file(os.path.join(here, PTH), os.path.join(self.build_lib, PTH), preserve_mode=False)

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH)]


setup(cmdclass={"build_py": BuildPyWithPth})
