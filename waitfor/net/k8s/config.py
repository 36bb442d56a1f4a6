"""Where the API server is and who we are to it: found as kubectl (client-go) finds it.

Order, as kubectl's loading rules: the kubeconfig files (``KUBECONFIG``, a ``:``-separated list
merged as client-go merges it — the first file to set a map entry or ``current-context`` wins,
missing files are skipped — else ``~/.kube/config``); when there is none, the pod's
ServiceAccount (``KUBERNETES_SERVICE_HOST``/``_PORT``, ``token``, ``ca.crt`` and ``namespace`` in
:data:`SERVICE_ACCOUNT_DIR`). Relative paths in a kubeconfig are relative to its file.

The in-cluster token is re-read on every attempt (projected tokens rotate); a ``tokenFile`` too.
Exec credential plugins (``client.authentication.k8s.io`` v1 and v1beta1) are run with the
kubeconfig's env plus ``KUBERNETES_EXEC_INFO``; their credential is kept until its
``expirationTimestamp`` or until the server refuses it. Nothing here ever formats a token, a
password or a key into a message.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import ssl
import time
from collections.abc import Mapping, Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:  # the event loop is only imported for an exec plugin: the first attempt
    import asyncio  # (:meth:`Source.credentials_now`) reads credentials without it
    from typing import Any

    Json = dict[str, Any]

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
#: an exec credential is renewed this long before it expires
EXPIRY_MARGIN = 10.0
#: what an exec plugin may write: an ExecCredential is a few KB (a certificate and key ~5 KB);
#: more is a broken plugin, stopped before it fills the memory of a 128 Mi container
MAX_PLUGIN_OUTPUT = 1 << 20
#: kubeconfig fields that change where the request goes or whom it acts as: not supported, so
#: refused (exit 2) rather than ignored
_UNSUPPORTED_CLUSTER = ("proxy-url",)
_IMPERSONATION = ("as", "as-uid", "as-groups", "as-user-extra")


class ConfigError(Exception):
    """Credentials that cannot work as configured: one line, nothing secret (exit 2)."""


class CredentialError(Exception):
    """Credentials that may work later (a plugin that failed this time): not ready."""


class Credentials:
    """One attempt's way to the API server."""

    def __init__(
        self,
        server: str,
        context: ssl.SSLContext,
        headers: dict[str, str],
        namespace: str,
        who: str,
        sni: str | None = None,
        secrets: frozenset[str] = frozenset(),
    ) -> None:
        self.server = server  # https://host:port[/prefix]
        self.context = context
        self.headers = headers  # Authorization; its value is a secret
        #: the default namespace: the pod's or the context's, else "default"
        self.namespace = namespace
        #: whom the server sees, for reasons: "serviceaccount app/default", "user admin"
        self.who = who
        self.sni = sni  # tls-server-name
        self.secrets = secrets


class _Plugin:
    """An exec credential plugin's last answer, kept until it expires."""

    def __init__(
        self,
        token: str | None = None,
        cert_pem: str | None = None,
        key_pem: str | None = None,
        expires: float = 0.0,  # time.time(); 0: never
    ) -> None:
        self.token, self.cert_pem, self.key_pem, self.expires = token, cert_pem, key_pem, expires


class Source:
    """Where credentials come from; built once per check, asked once per attempt."""

    def __init__(
        self, context_name: str | None = None, environ: Mapping[str, str] | None = None
    ) -> None:
        self.context_name = context_name
        self.environ = os.environ if environ is None else environ
        self._plugin: _Plugin | None = None
        self._kubeconfig: tuple[Json, str] | None = None  # merged config, display of the files

    def forget_plugin_credential(self) -> None:
        """The server refused it (401): the next attempt runs the plugin again."""
        self._plugin = None

    async def credentials(self, budget: float) -> Credentials:
        files = kubeconfig_files(self.environ)
        if files:
            if self._kubeconfig is None:
                self._kubeconfig = (merge(files), ", ".join(files))
            merged, shown = self._kubeconfig
            chosen = _choose(merged, shown, self.context_name)
            plugin = None
            if chosen.user.get("exec"):
                plugin = await self._run_plugin(chosen.user["exec"], chosen.cluster, budget)
            try:
                return _finish(chosen, plugin)
            except CredentialError:
                self._plugin = None  # the plugin's pair did not load: ask it again next time
                raise
        if self.context_name is not None:
            raise ConfigError(f"context={self.context_name} needs a kubeconfig (none found)")
        return in_cluster(self.environ)

    def credentials_now(self) -> Credentials | None:
        """The credentials without the event loop or PyYAML, for the first attempt: None where
        that cannot be done exactly (an exec plugin, a kubeconfig outside :mod:`.plainyaml`'s
        subset) or where :meth:`credentials` would fail (it then says why)."""
        try:
            files = kubeconfig_files(self.environ)
            if not files:
                return in_cluster(self.environ) if self.context_name is None else None
            documents = [load_file_now(path) for path in files]
            if any(document is None for document in documents):
                return None
            merged = merge(files, documents)
            chosen = _choose(merged, ", ".join(files), self.context_name)
            if chosen.user.get("exec"):
                return None
            return _finish(chosen, None)
        except (ConfigError, CredentialError):
            return None

    async def _run_plugin(self, spec: Json, cluster: Json, budget: float) -> _Plugin:
        cached = self._plugin
        if cached is not None and (not cached.expires or cached.expires > time.time()):
            return cached
        self._plugin = plugin = await run_exec_plugin(spec, cluster, self.environ, budget)
        return plugin


class _Chosen:
    """The context's cluster and user, checked, before an exec plugin runs."""

    def __init__(
        self,
        context: Json,
        cluster: Json,
        server: str,
        user_name: str,
        user: Json,
        token: str | None,
        cert_pem: str | None,
        key_pem: str | None,
    ) -> None:
        self.context, self.cluster, self.server = context, cluster, server
        self.user_name, self.user, self.token = user_name, user, token
        self.cert_pem, self.key_pem = cert_pem, key_pem


def _choose(config: Json, shown: str, context_name: str | None) -> _Chosen:
    name = context_name or config.get("current-context") or ""
    if not name:
        raise ConfigError(f"kubeconfig {shown} has no current-context (give #context=NAME)")
    contexts = _named(config, "contexts", "context")
    if name not in contexts:
        known = ", ".join(sorted(contexts)) or "none"
        raise ConfigError(f"kubeconfig {shown} has no context {name!r} (known: {known})")
    context = contexts[name]
    clusters = _named(config, "clusters", "cluster")
    cluster = clusters.get(context.get("cluster") or "")
    if cluster is None:
        raise ConfigError(f"context {name!r}: no cluster {context.get('cluster')!r}")
    for key in _UNSUPPORTED_CLUSTER:
        if cluster.get(key):  # its value is not shown: a proxy URL may carry a password
            raise ConfigError(
                f"context {name!r}: cluster {context.get('cluster')!r} sets {key}, which "
                "waitfor does not support (it connects to the server directly)"
            )
    server = str(cluster.get("server") or "").rstrip("/")
    if not _server_url(server):
        raise ConfigError(f"context {name!r}: cluster server must be an http(s) URL")
    user_name = str(context.get("user") or "")
    user = _named(config, "users", "user").get(user_name, {})
    for key in _IMPERSONATION:
        if user.get(key):
            raise ConfigError(
                f"kubeconfig user {user_name!r} sets {key} (impersonation), which waitfor "
                "does not support"
            )
    cert_pem = _pem(user, "client-certificate")
    key_pem = _pem(user, "client-key")
    token = user.get("token") or None
    if token and (problem := bearer_problem(str(token))):
        raise ConfigError(f"kubeconfig user {user_name!r} token is not a bearer token: {problem}")
    if user.get("tokenFile"):
        token = _read_token(str(user["tokenFile"]), "tokenFile") or token
    if not user.get("exec") and user.get("auth-provider"):
        provider = str((user["auth-provider"] or {}).get("name") or "?")
        raise ConfigError(
            f"user {user_name!r}: auth-provider {provider!r} is not supported "
            "(removed from kubectl; use its exec credential plugin)"
        )
    return _Chosen(
        context, cluster, server, user_name, user, token and str(token), cert_pem, key_pem
    )


def _finish(chosen: _Chosen, plugin: _Plugin | None) -> Credentials:
    """The credentials of a chosen context (with its exec plugin's answer, if it has one)."""
    user, user_name, cluster = chosen.user, chosen.user_name, chosen.cluster
    headers: dict[str, str] = {}
    secrets: set[str] = set()
    token, cert_pem, key_pem = chosen.token, chosen.cert_pem, chosen.key_pem
    pair_from = None  # the plugin that gave the certificate, if one did
    if plugin is not None:
        token = plugin.token or token
        if plugin.cert_pem and plugin.key_pem:
            cert_pem, key_pem = plugin.cert_pem, plugin.key_pem
            pair_from = f"exec plugin {_plugin_name(user['exec'])}"
    if token:
        headers["Authorization"] = f"Bearer {token}"
        secrets.add(str(token))
    elif user.get("username") and user.get("password"):
        if problem := _basic_problem(str(user["username"]), str(user["password"])):
            raise ConfigError(
                f"kubeconfig user {user_name!r} username / password cannot be sent as basic "
                f"auth: {problem}"
            )
        pair = f"{user['username']}:{user['password']}".encode()
        headers["Authorization"] = f"Basic {base64.b64encode(pair).decode()}"
        secrets.update({str(user["password"]), headers["Authorization"][6:]})
    if key_pem:
        secrets.add(key_pem)
    tls = tls_context(
        ca_pem=_pem(cluster, "certificate-authority"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        cert_pem=cert_pem,
        key_pem=key_pem,
        pair_from=pair_from,
    )
    return Credentials(
        server=chosen.server,
        context=tls,
        headers=headers,
        namespace=str(chosen.context.get("namespace") or "") or "default",
        who=f"user {user_name}" if user_name else "the anonymous user",
        sni=cluster.get("tls-server-name") or None,
        secrets=frozenset(secrets),
    )


def bearer_problem(token: str) -> str | None:
    """Why ``token`` cannot be sent as ``Authorization: Bearer TOKEN``, in words that do not
    quote it; None if it can. RFC 9110 forbids control characters, DEL and (but as opaque
    obs-text) non-ASCII in a field value; the API server takes the token up to the first space.
    Refused here, before any header is built: httpx's error would quote the header's value."""
    for char in token:
        if char in " \t":
            return "it holds white space"
        if not char.isascii():
            return "it holds a non-ASCII character"
        if not char.isprintable():
            return "it holds a control character"
    return None


def _basic_problem(username: str, password: str) -> str | None:
    """RFC 7617: no control characters in either, no ``:`` in the user-id (the server splits
    the pair at the first one)."""
    if ":" in username:
        return "the username holds a ':'"
    if not (username + password).isprintable():
        return "it holds a control character"
    return None


def _plugin_name(spec: Json) -> str:
    return os.path.basename(str(spec.get("command") or "")) or "?"


def _server_url(text: str) -> bool:
    """An http(s) URL with a host and a valid port: what httpx can be given."""
    from urllib.parse import urlsplit

    if not text.startswith(("https://", "http://")) or not text.isprintable() or " " in text:
        return False
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        return False
    return bool(parts.hostname)


def kubeconfig_files(environ: Mapping[str, str]) -> list[str]:
    """The kubeconfig files that exist, in kubectl's order (KUBECONFIG, else ~/.kube/config)."""
    listed = environ.get("KUBECONFIG", "")
    if listed:
        candidates = [path for path in listed.split(os.pathsep) if path]
    else:
        home = environ.get("HOME") or os.path.expanduser("~")
        candidates = [os.path.join(home, ".kube", "config")]
    seen: list[str] = []
    for path in candidates:
        if path not in seen and os.path.isfile(path):
            seen.append(path)
    return seen


def merge(files: list[str], documents: Sequence[Json | None] = ()) -> Json:
    """client-go's merge: per name, the first file to define a cluster/context/user wins, and
    the first ``current-context`` wins. Relative paths are resolved against each file's folder.
    ``documents``: the files already read (:func:`load_file_now`)."""
    merged: Json = {"clusters": [], "contexts": [], "users": []}
    for index, path in enumerate(files):
        read = documents[index] if index < len(documents) else None
        document = read if read is not None else load_file(path)
        base = os.path.dirname(os.path.abspath(path))
        if not merged.get("current-context") and document.get("current-context"):
            merged["current-context"] = document["current-context"]
        for section, inner in (("clusters", "cluster"), ("contexts", "context"), ("users", "user")):
            have = {entry.get("name") for entry in merged[section]}
            for entry in document.get(section) or []:
                if not isinstance(entry, dict) or entry.get("name") in have:
                    continue
                body = entry.get(inner)
                if not isinstance(body, dict):
                    body = {}
                merged[section].append({"name": entry.get("name"), inner: _resolve(body, base)})
                have.add(entry.get("name"))
    return merged


def load_file_now(path: str) -> Json | None:
    """The file, read without PyYAML (:mod:`.plainyaml`), checked as :func:`load_file` checks
    it; None if that reader steps aside or the file is not usable (:func:`load_file` says why)."""
    from waitfor.net.k8s import plainyaml

    try:
        with open(path, encoding="ascii") as file:
            text = file.read(MAX_KUBECONFIG + 1)
    except (OSError, UnicodeError):
        return None
    document = plainyaml.load(text) if len(text) <= MAX_KUBECONFIG else None
    if not isinstance(document, dict):
        return None
    try:
        check_shape(document, path)
    except ConfigError:
        return None
    return document


def load_file(path: str) -> Json:
    import yaml

    try:
        with open(path, encoding="utf-8") as file:
            text = file.read(MAX_KUBECONFIG + 1)
        if len(text) > MAX_KUBECONFIG:
            raise ConfigError(f"kubeconfig {path} is larger than {MAX_KUBECONFIG >> 20} MiB")
        document = yaml.safe_load(text)
    except OSError as exc:
        raise ConfigError(f"kubeconfig {path}: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"kubeconfig {path} is not valid YAML{where}") from None
    except RecursionError:
        raise ConfigError(f"kubeconfig {path} is nested too deeply") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(f"kubeconfig {path} is not a mapping")
    check_shape(document, path)
    return document


#: a kubeconfig is parsed on the event loop (pure-Python YAML, ~3 MB/s): bounded so that the
#: deadline holds; real ones are kilobytes (one cluster's CA is ~2 KB)
MAX_KUBECONFIG = 2 << 20

#: kubeconfig fields and the type each must have (client-go's schema): everything read later
#: is checked here once, so no value of another type (a YAML alias to a list, a bomb) is ever
#: turned into text
_SHAPE: dict[str, dict[str, type]] = {
    "cluster": {
        "server": str,
        "certificate-authority": str,
        "certificate-authority-data": str,
        "insecure-skip-tls-verify": bool,
        "tls-server-name": str,
        "proxy-url": str,
        "extensions": list,
    },
    "context": {"cluster": str, "user": str, "namespace": str},
    "user": {
        "token": str,
        "tokenFile": str,
        "client-certificate": str,
        "client-certificate-data": str,
        "client-key": str,
        "client-key-data": str,
        "username": str,
        "password": str,
        "exec": dict,
        "auth-provider": dict,
        "as": str,
        "as-uid": str,
        "as-groups": list,
        "as-user-extra": dict,
    },
    "exec": {
        "apiVersion": str,
        "command": str,
        "args": list,
        "env": list,
        "installHint": str,
        "provideClusterInfo": bool,
    },
}
_TYPE_NAMES = {str: "a string", bool: "true or false", list: "a list", dict: "a mapping"}


def check_shape(document: Json, path: str) -> None:
    """ConfigError naming the first field of the wrong type (never its value)."""

    def need(value: object, kind: type, where: str) -> None:
        if value is not None and not isinstance(value, kind):
            raise ConfigError(f"kubeconfig {path}: {where} must be {_TYPE_NAMES[kind]}")

    need(document.get("current-context"), str, "current-context")
    for section, inner in (("clusters", "cluster"), ("contexts", "context"), ("users", "user")):
        entries = document.get(section)
        need(entries, list, section)
        for index, entry in enumerate(entries or []):
            where = f"{section}[{index}]"
            need(entry, dict, where)
            need(entry.get("name"), str, f"{where}.name")
            body = entry.get(inner)
            need(body, dict, f"{where}.{inner}")
            for key, kind in _SHAPE[inner].items():
                need((body or {}).get(key), kind, f"{where}.{inner}.{key}")
            plugin = (body or {}).get("exec")
            if inner == "user" and plugin:
                for key, kind in _SHAPE["exec"].items():
                    need(plugin.get(key), kind, f"{where}.user.exec.{key}")
                for number, arg in enumerate(plugin.get("args") or []):
                    need(arg, str, f"{where}.user.exec.args[{number}]")
                for number, item in enumerate(plugin.get("env") or []):
                    need(item, dict, f"{where}.user.exec.env[{number}]")
                    for key in ("name", "value"):
                        need(item.get(key), str, f"{where}.user.exec.env[{number}].{key}")


_PATH_KEYS = ("certificate-authority", "client-certificate", "client-key", "tokenFile")


def _resolve(body: Json, base: str) -> Json:
    resolved = dict(body)
    for key in _PATH_KEYS:
        value = resolved.get(key)
        if isinstance(value, str) and value and not os.path.isabs(value):
            resolved[key] = os.path.join(base, os.path.expanduser(value))
    plugin = resolved.get("exec")
    if isinstance(plugin, dict):
        command = plugin.get("command")
        # client-go: a command with a path separator is relative to the file; a bare name is
        # looked up on PATH.
        if isinstance(command, str) and os.sep in command and not os.path.isabs(command):
            resolved["exec"] = {**plugin, "command": os.path.join(base, command)}
    return resolved


def _named(config: Json, section: str, inner: str) -> dict[str, Json]:
    found: dict[str, Json] = {}
    for entry in config.get(section) or []:
        if isinstance(entry, dict) and isinstance(entry.get(inner), dict):
            found.setdefault(str(entry.get("name")), entry[inner])
    return found


def _pem(body: Json, key: str) -> str | None:
    """``key-data`` (base64 of PEM) wins over the ``key`` file, as in client-go."""
    data = body.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(str(data), validate=False).decode()
        except (ValueError, UnicodeError):
            raise ConfigError(f"{key}-data is not base64 of a PEM file") from None
    path = body.get(key)
    if not path:
        return None
    try:
        with open(str(path), encoding="utf-8") as file:
            return file.read()
    except (OSError, UnicodeError) as exc:
        problem = getattr(exc, "strerror", None) or "not readable as text"
        raise ConfigError(f"{key} {path}: {problem}") from None


def _read_token(path: str, what: str) -> str:
    """The token in a file, checked (not ready if it cannot be sent: the file may be rewritten)."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as file:
            token = file.read(MAX_PLUGIN_OUTPUT + 1).strip()
    except OSError as exc:
        raise CredentialError(f"{what} {path}: {exc.strerror or exc}") from None
    if len(token) > MAX_PLUGIN_OUTPUT:  # bounded as a plugin's output: a token is kilobytes
        raise CredentialError(f"{what} {path} is larger than {MAX_PLUGIN_OUTPUT >> 20} MiB")
    if problem := bearer_problem(token):
        raise CredentialError(f"{what} {path} is not a bearer token: {problem}")
    return token


def in_cluster(environ: Mapping[str, str]) -> Credentials:
    host = environ.get("KUBERNETES_SERVICE_HOST", "")
    port = environ.get("KUBERNETES_SERVICE_PORT", "")
    token_path = os.path.join(SERVICE_ACCOUNT_DIR, "token")
    if not host or not port or not os.path.exists(token_path):
        raise ConfigError(
            "no Kubernetes credentials: no kubeconfig (KUBECONFIG, ~/.kube/config) and not in a "
            f"pod (KUBERNETES_SERVICE_HOST/PORT and {token_path})"
        )
    token = _read_token(token_path, "serviceaccount token")  # re-read: projected tokens rotate
    ca = _pem(
        {"certificate-authority": os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt")},
        "certificate-authority",
    )
    namespace = environ.get("POD_NAMESPACE", "").strip()
    if not namespace:
        try:
            with open(os.path.join(SERVICE_ACCOUNT_DIR, "namespace"), encoding="utf-8") as file:
                namespace = file.read().strip()
        except OSError:
            namespace = ""
    hostport = f"[{host}]" if ":" in host else host
    return Credentials(
        server=f"https://{hostport}:{port}",
        context=tls_context(ca_pem=ca),
        headers={"Authorization": f"Bearer {token}"} if token else {},
        namespace=namespace or "default",
        who=_token_subject(token) or "this pod's serviceaccount",
        secrets=frozenset({token} if token else ()),
    )


def _token_subject(token: str) -> str | None:
    """ "serviceaccount NS/NAME" from a ServiceAccount JWT's (unverified) subject claim."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        subject = str(claims.get("sub", ""))
    except (IndexError, ValueError, AttributeError, UnicodeError):
        return None
    prefix = "system:serviceaccount:"
    if subject.startswith(prefix) and subject.count(":") == 3:
        namespace, name = subject[len(prefix) :].split(":")
        return f"serviceaccount {namespace}/{name}"
    return None


#: contexts made, the most recently used last; at most CONTEXTS_KEPT (an exec plugin's
#: rotating client certificates make a new one each time)
_CONTEXTS: dict[tuple[str | None, bool, str | None, str | None], ssl.SSLContext] = {}
CONTEXTS_KEPT = 8


def tls_context(
    *,
    ca_pem: str | None = None,
    insecure: bool = False,
    cert_pem: str | None = None,
    key_pem: str | None = None,
    pair_from: str | None = None,
) -> ssl.SSLContext:
    """A client context from PEM text (kubeconfigs carry data as often as files); cached.

    ``pair_from`` names the exec plugin that gave the certificate and key: if they do not load,
    that is not ready (CredentialError, the plugin may do better), not a configuration error."""
    key = (ca_pem, insecure, cert_pem, key_pem)
    cached = _CONTEXTS.pop(key, None)
    if cached is not None:
        _CONTEXTS[key] = cached  # the most recently used, last
        return cached
    if insecure:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif ca_pem:
        try:
            context = ssl.create_default_context(cadata=ca_pem)
        except (ssl.SSLError, ValueError):
            raise ConfigError("certificate-authority is not a PEM CA certificate") from None
    else:
        context = ssl.create_default_context()
    if cert_pem and key_pem:
        try:
            _load_cert_chain(context, cert_pem, key_pem)
        except ConfigError:
            if pair_from is None:
                raise
            raise CredentialError(
                f"{pair_from}: client certificate / key are not a usable PEM pair"
            ) from None
    while len(_CONTEXTS) >= CONTEXTS_KEPT:
        del _CONTEXTS[next(iter(_CONTEXTS))]  # the least recently used
    _CONTEXTS[key] = context
    return context


def _load_cert_chain(context: ssl.SSLContext, cert_pem: str, key_pem: str) -> None:
    """ssl only loads keys from files: an anonymous in-memory file (memfd), nothing on disk."""
    descriptors = []
    try:
        paths = []
        for name, text in (("cert", cert_pem), ("key", key_pem)):
            fd = os.memfd_create(f"waitfor-k8s-{name}", os.MFD_CLOEXEC)
            descriptors.append(fd)
            os.write(fd, text.encode("utf-8", "surrogateescape"))
            paths.append(f"/proc/self/fd/{fd}")
        context.load_cert_chain(paths[0], paths[1])
    except (ssl.SSLError, OSError, UnicodeError):
        raise ConfigError("client-certificate / client-key are not a usable PEM pair") from None
    finally:
        for fd in descriptors:
            os.close(fd)


def _exec_extension(extensions: object) -> object:
    """The cluster's ``client.authentication.k8s.io/exec`` extension, as client-go passes it;
    None if it is missing or too large to send (a YAML alias bomb would expand in json.dumps)."""
    for item in extensions if isinstance(extensions, list) else []:
        if isinstance(item, dict) and item.get("name") == "client.authentication.k8s.io/exec":
            value = item.get("extension")
            return value if _small(value, 10_000) else None
    return None


def _small(value: object, limit: int) -> bool:
    """Fewer than ``limit`` values in all, shared ones counted each time they appear."""
    pending, seen = [value], 0
    while pending:
        seen += 1
        if seen > limit:
            return False
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return True


async def run_exec_plugin(
    spec: Json, cluster: Json, environ: Mapping[str, str], budget: float
) -> _Plugin:
    """Run an exec credential plugin once and read its ExecCredential."""
    import asyncio

    api_version = str(spec.get("apiVersion") or "")
    command = str(spec.get("command") or "")
    if api_version not in EXEC_API_VERSIONS:
        raise ConfigError(
            f"exec plugin {command or '?'}: apiVersion {api_version!r} is not supported "
            f"(supported: {', '.join(EXEC_API_VERSIONS)})"
        )
    if not command:
        raise ConfigError("exec plugin without a command")
    env = dict(environ)
    for item in spec.get("env") or []:
        if isinstance(item, dict) and item.get("name"):
            env[str(item["name"])] = str(item.get("value") or "")
    info: Json = {"interactive": False}
    if spec.get("provideClusterInfo"):
        info["cluster"] = {
            k: v
            for k, v in {
                "server": cluster.get("server"),
                "tls-server-name": cluster.get("tls-server-name"),
                "insecure-skip-tls-verify": cluster.get("insecure-skip-tls-verify"),
                "certificate-authority-data": cluster.get("certificate-authority-data"),
                "config": _exec_extension(cluster.get("extensions")),
            }.items()
            if v
        }
    env["KUBERNETES_EXEC_INFO"] = json.dumps(
        {"apiVersion": api_version, "kind": "ExecCredential", "spec": info}
    )
    argv = [command, *(str(arg) for arg in spec.get("args") or [])]
    shown = _plugin_name(spec)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,  # its children are stopped with it (see below)
        )
    except OSError as exc:
        hint = f" ({spec['installHint']})" if spec.get("installHint") else ""
        raise ConfigError(f"exec plugin {shown}: {exc.strerror or exc}{hint}") from None
    from waitfor.net.activity import waiting_on

    try:
        # Cut off by the attempt's end instead, the runner says the same (waiting_on).
        with waiting_on(lambda waited: f"exec plugin {shown} did not finish in {waited:.1f}s"):
            async with asyncio.timeout(budget):
                stdout = await _read_bounded(process, shown)
                await process.wait()
    except BaseException as exc:
        # The whole group: a child left holding stdout would keep the pipe open, and asyncio
        # (3.11) waits for the pipes before wait() returns. Reaped by the child watcher.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if isinstance(exc, TimeoutError):
            raise CredentialError(
                f"exec plugin {shown} did not finish within {budget:.1f}s"
            ) from None
        raise
    if process.returncode != 0:
        raise CredentialError(f"exec plugin {shown} exited with status {process.returncode}")
    from waitfor.base import jsonexpect as expect

    not_one = f"exec plugin {shown} did not print an ExecCredential of {api_version}"
    try:
        credential = expect.load(stdout.decode())  # bounded nesting
    except (ValueError, UnicodeError):
        raise CredentialError(not_one) from None
    # What it printed is not shown: it may be the credential itself.
    if not isinstance(credential, dict) or (
        credential.get("apiVersion") != api_version or credential.get("kind") != "ExecCredential"
    ):
        raise CredentialError(not_one)
    status = credential.get("status") or {}
    if not isinstance(status, dict):
        raise CredentialError(not_one)
    token = _text(status.get("token")) or None
    cert = _text(status.get("clientCertificateData")) or None
    key = _text(status.get("clientKeyData")) or None
    if not token and not (cert and key):
        raise CredentialError(f"exec plugin {shown} gave neither a token nor a certificate")
    if token and (problem := bearer_problem(token)):
        raise CredentialError(
            f"exec plugin {shown} gave a token that is not a bearer token: {problem}"
        )
    expires = 0.0
    if status.get("expirationTimestamp"):
        try:
            stamp = _text(status["expirationTimestamp"]).replace("Z", "+00:00")
            from datetime import datetime

            expires = datetime.fromisoformat(stamp).timestamp() - EXPIRY_MARGIN
        except ValueError:
            raise CredentialError(f"exec plugin {shown}: unreadable expirationTimestamp") from None
    return _Plugin(token=token, cert_pem=cert, key_pem=key, expires=expires)


async def _read_bounded(process: asyncio.subprocess.Process, shown: str) -> bytes:
    """The plugin's stdout, at most MAX_PLUGIN_OUTPUT bytes (its stderr goes to /dev/null: never
    read, never shown, since a plugin may print the token there)."""
    assert process.stdout is not None
    chunks: list[bytes] = []
    size = 0
    while chunk := await process.stdout.read(1 << 16):
        size += len(chunk)
        if size > MAX_PLUGIN_OUTPUT:
            raise CredentialError(
                f"exec plugin {shown} wrote more than {MAX_PLUGIN_OUTPUT >> 20} MiB"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
