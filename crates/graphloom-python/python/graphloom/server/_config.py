"""``langgraph.json`` as ``graphloom serve`` reads it.

Honoured: ``graphs`` (``"./path.py:attr"`` or ``"package.module:attr"``, a compiled graph
or a function returning one; or ``{"path": ..., "description": ...}``), ``dependencies``
(local directories go on ``sys.path``; package names must be installed already, as with
``langgraph dev``), ``env`` (a ``.env`` file or a mapping), ``store.index`` and
``store.ttl`` (graphloom's store), ``checkpointer.ttl``, ``auth.path``, ``http.app`` and
``webhooks`` (the URL policy and static headers of webhook deliveries). Keys that only shape a Docker image
(``python_version``, ``dockerfile_lines``, ...) are ignored, as ``langgraph dev`` does.
Keys graphloom does not serve yet are refused by name, never silently dropped.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

# Read only when building an image: no meaning for a server started in place.
_IMAGE_KEYS = {
    "python_version",
    "node_version",
    "pip_config_file",
    "pip_installer",
    "dockerfile_lines",
    "base_image",
    "image_distro",
    "keep_pkg_tools",
    "api_version",
    "$schema",
}

_SERVED_KEYS = {"graphs", "dependencies", "env", "store", "checkpointer", "auth", "http", "webhooks"}

# What each key not served yet is, for the error that names it.
_NOT_YET = {
    "ui": "generative UI components",
    "ui_config": "generative UI components",
    "encryption": "custom encryption",
}


# `${{ env.VAR }}` in a webhook header's value (the Rust CLI reads the same form).
_TEMPLATE = re.compile(r"\$\{\{(.*?)\}\}")
_WEBHOOK_URL_KEYS = {"require_https", "allowed_domains", "allowed_ports", "max_url_length", "disable_loopback"}


class ConfigError(Exception):
    """A ``langgraph.json`` graphloom cannot serve; the message says what and where."""


@dataclass
class ServeConfig:
    path: str
    graphs: dict[str, str]
    dependencies: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    store_index: dict | None = None
    store_ttl: dict | None = None
    checkpointer_ttl: dict | None = None
    auth_path: str | None = None
    http_app: str | None = None
    webhooks: dict | None = None

    def ttl_args(self, given: list[str]) -> list[str]:
        """``checkpointer.ttl`` and ``store.ttl`` as the server's options (the thread TTL
        and its strategy, the store items' TTL, the sweep interval), each unless the
        command line gives it."""
        out: list[str] = []

        def add(flag: str, value: Any) -> None:
            if value is not None and not any(a == flag or a.startswith(flag + "=") for a in given):
                out.extend([flag, str(value)])

        sweeps = []
        if self.checkpointer_ttl:
            ttl = self.checkpointer_ttl
            add("--thread-ttl-minutes", ttl.get("default_ttl"))
            strategy = ttl.get("strategy")
            if strategy is not None:
                add("--thread-ttl-strategy", {"delete": "delete", "keep_latest": "keep-latest"}[strategy])
            sweeps.append(ttl.get("sweep_interval_minutes"))
        if self.store_ttl:
            add("--store-ttl-minutes", self.store_ttl.get("default_ttl"))
            sweeps.append(self.store_ttl.get("sweep_interval_minutes"))
        sweeps = [float(m) for m in sweeps if m is not None]
        if sweeps:
            add("--sweep-interval-secs", min(sweeps) * 60.0)
        return out

    def webhook_args(self, given: list[str]) -> list[str]:
        """``webhooks`` as the server's options, each unless the command line gives that
        option. Header templates are checked here against the environment (after ``env`` is
        applied) and passed on as written: the server resolves them the same way, so their
        values never appear in its arguments."""
        if not self.webhooks:
            return []
        out: list[str] = []

        def gives(flag: str) -> bool:
            return any(a == flag or a.startswith(flag + "=") for a in given)

        def add(flag: str, values: list[Any]) -> None:
            if values and not gives(flag):
                for v in values:
                    out.append(f"{flag}={v}")

        prefix = self.webhooks.get("env_prefix", "LG_WEBHOOK_")
        if gives("--webhook-env-prefix"):
            prefix = _flag_value(given, "--webhook-env-prefix") or prefix
        else:
            add("--webhook-env-prefix", [prefix])
        url = self.webhooks.get("url") or {}
        if url.get("require_https") is False and not gives("--webhook-allow-http"):
            out.append("--webhook-allow-http")
        # `disable_loopback: false` opens loopback addresses and `localhost` names to
        # deliveries. Relative URLs (calls to the server's own routes) are never delivered,
        # whatever its value.
        if url.get("disable_loopback") is False and not gives("--webhook-allow-loopback"):
            out.append("--webhook-allow-loopback")
        add("--webhook-allow-domain", url.get("allowed_domains") or [])
        add("--webhook-allow-port", url.get("allowed_ports") or [])
        if url.get("max_url_length") is not None:
            add("--webhook-max-url-length", [url["max_url_length"]])
        headers = self.webhooks.get("headers") or {}
        for name, value in headers.items():
            if "${{" in _TEMPLATE.sub("", value):
                raise ConfigError(f"{self.path}: webhooks.headers.{name}: unclosed `${{{{` in its value")
            for var in _TEMPLATE.findall(value):
                var = var.strip()
                if not var.startswith("env."):
                    raise ConfigError(
                        f"{self.path}: webhooks.headers.{name}: `${{{{ {var} }}}}` is not `${{{{ env.VAR }}}}`"
                    )
                var = var[4:].strip()
                if not var.startswith(prefix):
                    raise ConfigError(
                        f"{self.path}: webhooks.headers.{name} names {var}, which does not start "
                        f"with webhooks.env_prefix {prefix!r}"
                    )
                if var not in os.environ:
                    raise ConfigError(f"{self.path}: webhooks.headers.{name} names {var}, which is not set")
        add("--webhook-header", [f"{name}: {value}" for name, value in headers.items()])
        return out

    @property
    def root(self) -> str:
        return os.path.dirname(os.path.abspath(self.path))

    def apply_environment(self) -> None:
        """Set ``env`` (without overriding what the environment already has, as
        ``langgraph dev`` does) and put local dependencies on ``sys.path``."""
        for key, value in self.env.items():
            os.environ.setdefault(key, value)
        for dep in reversed(self.dependencies):
            if dep.startswith((".", "/")):
                path = os.path.normpath(os.path.join(self.root, dep))
                if not os.path.isdir(path):
                    raise ConfigError(f"{self.path}: dependency {dep!r} is not a directory ({path})")
                if path not in sys.path:
                    sys.path.insert(0, path)

    def resolve_index(self, index: Any) -> dict:
        """``store.index`` with an ``embed`` of ``./file.py:function`` imported (a model
        string such as ``openai:text-embedding-3-small`` is LangChain's to resolve)."""
        if not isinstance(index, dict) or "dims" not in index or "embed" not in index:
            raise ConfigError(f"{self.path}: store.index needs `dims` and `embed`")
        embed = index["embed"]
        if isinstance(embed, str) and ":" in embed:
            where = embed.rpartition(":")[0]
            if where.endswith(".py") or where.startswith((".", "/")):
                index = {**index, "embed": self.import_graph("store.index.embed", embed)}
        return index

    def import_graph(self, graph_id: str, spec: str) -> Any:
        """The object ``spec`` names: ``./file.py:attr`` or ``module:attr``. ``graph_id``
        names it in errors: a graph's id, or the key (``auth.path``) that names it."""
        what = graph_id if graph_id.startswith(("auth.", "store.", "http.")) else f"graph {graph_id!r}"
        where, sep, attr = spec.rpartition(":")
        if not sep or not where or not attr:
            raise ConfigError(
                f"{self.path}: {what} is {spec!r}; expected './path.py:variable' "
                "or 'package.module:variable'"
            )
        try:
            if where.endswith(".py") or where.startswith((".", "/")):
                module = self._import_file(what, graph_id, where)
            else:
                module = importlib.import_module(where)
        except ConfigError:
            raise
        except Exception as e:
            raise ConfigError(
                f"{what}: importing {where} failed: {type(e).__name__}: {e}"
            ) from e
        obj = module
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise ConfigError(f"{what}: {where} has no {attr!r}")
            obj = getattr(obj, part)
        return obj

    def _import_file(self, what: str, graph_id: str, where: str) -> Any:
        path = os.path.normpath(os.path.join(self.root, where))
        if not os.path.isfile(path):
            raise ConfigError(f"{what}: {where} is not a file ({path})")
        directory = os.path.dirname(path)
        if directory not in sys.path:
            sys.path.insert(0, directory)
        name = "graphloom_graph_" + "".join(c if c.isalnum() else "_" for c in graph_id)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ConfigError(f"{what}: {path} cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module


def _flag_value(args: list[str], flag: str) -> str | None:
    """The value given to ``flag`` in ``args`` (``--flag v`` or ``--flag=v``)."""
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a[len(flag) + 1 :]
    return None


def _check_webhooks(path: str, webhooks: Any) -> dict:
    """``webhooks`` checked: known keys, values of the right types."""
    if not isinstance(webhooks, dict):
        raise ConfigError(f"{path}: `webhooks` must be an object")
    unknown = set(webhooks) - {"env_prefix", "url", "headers"}
    if unknown:
        raise ConfigError(f"{path}: webhooks.{sorted(unknown)[0]} is not supported by graphloom serve yet")
    prefix = webhooks.get("env_prefix", "LG_WEBHOOK_")
    if not isinstance(prefix, str) or not prefix:
        raise ConfigError(f"{path}: webhooks.env_prefix must be a non-empty string")
    url = webhooks.get("url")
    if url is not None:
        if not isinstance(url, dict):
            raise ConfigError(f"{path}: webhooks.url must be an object")
        unknown = set(url) - _WEBHOOK_URL_KEYS
        if unknown:
            raise ConfigError(f"{path}: webhooks.url.{sorted(unknown)[0]} is not supported by graphloom serve yet")
        for key in ("require_https", "disable_loopback"):
            if key in url and not isinstance(url[key], bool):
                raise ConfigError(f"{path}: webhooks.url.{key} must be true or false")
        domains = url.get("allowed_domains")
        if domains is not None and (
            not isinstance(domains, list) or not all(isinstance(d, str) and d for d in domains)
        ):
            raise ConfigError(f"{path}: webhooks.url.allowed_domains must be a list of host names")
        ports = url.get("allowed_ports")
        if ports is not None and (
            not isinstance(ports, list)
            or not all(isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in ports)
        ):
            raise ConfigError(f"{path}: webhooks.url.allowed_ports must be a list of port numbers")
        length = url.get("max_url_length")
        if length is not None and (not isinstance(length, int) or isinstance(length, bool) or length <= 0):
            raise ConfigError(f"{path}: webhooks.url.max_url_length must be a positive integer")
    headers = webhooks.get("headers")
    if headers is not None and (
        not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values())
    ):
        raise ConfigError(f"{path}: webhooks.headers must map header names to strings")
    for name in headers or {}:
        if not name or ":" in name or any(c.isspace() for c in name):
            raise ConfigError(f"{path}: webhooks.headers: {name!r} is not a header name")
    return webhooks


def _read_env_file(path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, value = line.split("=", 1)
            key = key.removeprefix("export ").strip()
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            out[key] = value
    return out


def load_config(path: str | None) -> ServeConfig:
    """Read and check ``path`` (default ``./langgraph.json``)."""
    path = path or "langgraph.json"
    if not os.path.isfile(path):
        raise ConfigError(
            f"{path} not found: run graphloom serve where your langgraph.json is, or pass --config"
        )
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path} is not valid JSON (line {e.lineno}, column {e.colno}): {e.msg}")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must hold a JSON object")
    for key in raw:
        if key in _SERVED_KEYS or key in _IMAGE_KEYS:
            continue
        what = _NOT_YET.get(key)
        if what:
            raise ConfigError(f"{path}: `{key}` ({what}) is not supported by graphloom serve yet")
        raise ConfigError(f"{path}: unknown key `{key}`")
    graphs_raw = raw.get("graphs")
    if not isinstance(graphs_raw, dict) or not graphs_raw:
        raise ConfigError(f"{path}: `graphs` must map graph ids to './file.py:variable'")
    graphs: dict[str, str] = {}
    for graph_id, spec in graphs_raw.items():
        if isinstance(spec, dict):
            spec = spec.get("path")
        if not isinstance(spec, str):
            raise ConfigError(f"{path}: graph {graph_id!r} must be a string './file.py:variable'")
        graphs[graph_id] = spec
    deps = raw.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise ConfigError(f"{path}: `dependencies` must be a list of strings")
    config = ServeConfig(path=path, graphs=graphs, dependencies=deps)
    env = raw.get("env")
    if isinstance(env, str):
        env_path = os.path.normpath(os.path.join(config.root, env))
        if not os.path.isfile(env_path):
            raise ConfigError(f"{path}: env file {env!r} not found ({env_path})")
        config.env = _read_env_file(env_path)
    elif isinstance(env, dict):
        config.env = {str(k): str(v) for k, v in env.items()}
    elif env is not None:
        raise ConfigError(f"{path}: `env` must be a .env file path or an object")
    store = raw.get("store")
    if store is not None:
        if not isinstance(store, dict):
            raise ConfigError(f"{path}: `store` must be an object")
        unknown = set(store) - {"index", "ttl"}
        if unknown:
            raise ConfigError(f"{path}: store.{sorted(unknown)[0]} is not supported by graphloom serve yet")
        config.store_index = store.get("index")
        config.store_ttl = store.get("ttl")
        if config.store_index is not None:
            config.store_index = config.resolve_index(config.store_index)
    auth = raw.get("auth")
    if auth is not None:
        if not isinstance(auth, dict) or not isinstance(auth.get("path"), str):
            raise ConfigError(f"{path}: `auth` must be an object with `path` ('./auth.py:auth')")
        # `openapi` documents the security scheme for LangGraph's OpenAPI page, and
        # `disable_studio_auth` is about LangSmith's hosted Studio: neither changes who may
        # do what here.
        unknown = set(auth) - {"path", "openapi", "disable_studio_auth"}
        if unknown:
            raise ConfigError(f"{path}: auth.{sorted(unknown)[0]} is not supported by graphloom serve yet")
        config.auth_path = auth["path"]
    http = raw.get("http")
    if http is not None:
        if not isinstance(http, dict):
            raise ConfigError(f"{path}: `http` must be an object")
        # `disable_*: false` says what is the default; turning a group of the server's
        # routes off is not served yet.
        unknown = {k for k in http if not (k.startswith("disable_") and http[k] is False)} - {"app"}
        if unknown:
            raise ConfigError(f"{path}: http.{sorted(unknown)[0]} is not supported by graphloom serve yet")
        if http.get("app") is not None and not isinstance(http.get("app"), str):
            raise ConfigError(f"{path}: http.app must be './file.py:app'")
        config.http_app = http.get("app")
    checkpointer = raw.get("checkpointer")
    if checkpointer is not None:
        if not isinstance(checkpointer, dict):
            raise ConfigError(f"{path}: `checkpointer` must be an object")
        unknown = set(checkpointer) - {"ttl"}
        if unknown:
            raise ConfigError(
                f"{path}: checkpointer.{sorted(unknown)[0]} is not supported by graphloom serve yet"
            )
        ttl = checkpointer.get("ttl")
        if ttl is not None:
            if not isinstance(ttl, dict):
                raise ConfigError(f"{path}: checkpointer.ttl must be an object")
            if ttl.get("strategy", "delete") not in ("delete", "keep_latest"):
                raise ConfigError(
                    f"{path}: checkpointer.ttl.strategy must be \"delete\" or \"keep_latest\""
                )
            config.checkpointer_ttl = ttl
    webhooks = raw.get("webhooks")
    if webhooks is not None:
        config.webhooks = _check_webhooks(path, webhooks)
    return config
