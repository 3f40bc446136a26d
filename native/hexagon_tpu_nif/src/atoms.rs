//! Atoms used by the encoders.

rustler::atoms! {
    ok,
    error,
    closed,
    invalid_input,
    internal,
    u,
    s,
    f,
    bf,
    runtime,
    context,
    graph,
}
