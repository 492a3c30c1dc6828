"""Plug-ins: the name registries of algorithms, models, datasets and partitioners (``registry``), the parameters of a
function plug-in (``parameters``), loading plug-ins from outside fedbench (``loading``: entry points, ``--plugin``,
a recipe's ``plugins``) and what identifies their results (``identity``: sha256 or ``FEDBENCH_REVISION``). Every
public name is importable from here, ``fedbench.plugins``; docs/plugins.md describes them for plug-in authors.
"""

from fedbench.plugins.identity import REVISION_ATTRIBUTE, Plugin, is_builtin, plugin_of, source_changes
from fedbench.plugins.loading import ENTRY_POINT_GROUP, load_plugins, loaded_plugins, plugin_source, plugin_sources
from fedbench.plugins.parameters import check_params, json_value, parameter_defaults, parameter_hints, with_defaults
from fedbench.plugins.registry import (
    DuplicateName,
    PluginError,
    PluginRegistry,
    on_registry_change,
    register_catalogue,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "REVISION_ATTRIBUTE",
    "DuplicateName",
    "Plugin",
    "PluginError",
    "PluginRegistry",
    "check_params",
    "is_builtin",
    "json_value",
    "load_plugins",
    "loaded_plugins",
    "on_registry_change",
    "parameter_defaults",
    "parameter_hints",
    "plugin_of",
    "plugin_source",
    "plugin_sources",
    "register_catalogue",
    "source_changes",
    "with_defaults",
]
