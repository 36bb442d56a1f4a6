"""libpq's connection keywords: the same list for connection strings (:mod:`.conninfo`) and
service files (:mod:`.service`)."""

from __future__ import annotations

KEYWORDS = frozenset(
    """host hostaddr port dbname user password passfile channel_binding connect_timeout
    client_encoding options application_name fallback_application_name keepalives keepalives_idle
    keepalives_interval keepalives_count tcp_user_timeout replication gssencmode sslmode requiressl
    sslcompression sslcert sslkey sslpassword sslcertmode sslrootcert sslcrl sslcrldir sslsni
    requirepeer ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib gssdelegation
    service target_session_attrs load_balance_hosts sslnegotiation require_auth""".split()  # noqa: SIM905
)
