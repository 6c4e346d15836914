"""Django's PostgreSQL backend with every wait on the database bounded (settings: ENGINE
`agentplatform.plumbing.database_backend`).

A database that stops answering must cost a request a few seconds and a 503, never the worker.
libpq's `connect_timeout` bounds only the connection's set-up, and the server's
`statement_timeout` only a server that still runs. A frozen server (SIGSTOPped, a VM paused, a
storage stall) keeps accepting connections and acknowledging packets in its kernel: TCP
keepalives and `tcp_user_timeout` never fire, and a query on an open connection waits in recv
forever. So the client keeps its own deadline: psycopg runs every exchange with the server
(execute, fetch, commit, rollback, copy) through `Connection.wait`, whose `timeout` this
backend's connection class sets (`deadlines.DeadlineConnection`); no thread, no timer per query.

How long each kind of process waits is `deadlines.ProcessKind`'s, set once by its entry point.
"""
