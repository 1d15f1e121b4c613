"""The package-dir mapping, and the shim for Beam's ``--setup_file=./setup.py``.

Installed, the repository's top-level folders import as ``ctxledger.schemas``,
``ctxledger.pipelines``, ``ctxledger.jobs``, ``ctxledger.warehouse`` and
``ctxledger.serving`` (docs/packaging.md): a user's own ``schemas/`` can never
shadow ours, and the repository keeps its layout. The package list is computed
here, not listed in pyproject.toml, so a new subpackage needs no edit. Everything
else is configured in pyproject.toml; Beam runs ``python setup.py sdist`` when the
``build`` package is not installed, and ships the result to the workers.
"""

from setuptools import find_packages, setup

NAMESPACE = "ctxledger"
#: Repository folder -> installed package ``ctxledger.<folder>``.
FOLDERS = ("schemas", "pipelines", "jobs", "warehouse", "serving")

package_dir = {NAMESPACE: NAMESPACE}
packages = [NAMESPACE]
for folder in FOLDERS:
    package_dir[f"{NAMESPACE}.{folder}"] = folder
    packages.append(f"{NAMESPACE}.{folder}")
    packages += [f"{NAMESPACE}.{folder}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=package_dir)
