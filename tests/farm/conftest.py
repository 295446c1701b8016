from tests.farm.farmkit import farm_factory  # noqa: F401 - the farm fixture for this folder
