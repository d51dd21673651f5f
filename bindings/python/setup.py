# SPDX-License-Identifier: MIT
# The wheel carries libkis-sandbox.so.0 and kis-agent (kis_sandbox/_native,
# staged there by `make python`): it is a Linux x86-64 wheel, though no
# Python extension is compiled (ctypes loads the library).
import platform

from setuptools import setup
from setuptools.dist import Distribution

try:
    from wheel.bdist_wheel import bdist_wheel

    class PlatformWheel(bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            return "py3", "none", f"linux_{platform.machine()}"
    cmdclass = {"bdist_wheel": PlatformWheel}
except ImportError:  # building an sdist only
    cmdclass = {}


class NativeDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(distclass=NativeDistribution, cmdclass=cmdclass)
