//! Atoms used by the encoders.

rustler::atoms! {
    ok,
    error,
    closed,
    internal,
    u,
    s,
    f,
    bf,
    runtime,
    context,
    graph,
    queued,
    hexagon_tpu_reply,
    hexagon_tpu_log,
    warning,
    info,
    debug,
}
