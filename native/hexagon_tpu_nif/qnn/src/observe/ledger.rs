//! The live-object ledger: which `Runtime`, `Context` and `Graph` objects are alive, where each
//! was created and what it holds, so a leak report can say where a leaked object came from.
//!
//! Each entry also records the memory the object accounts for, in named parts ([`Held`]): a
//! context its binary's bytes (what QNN deserialized and keeps on the host until the context is
//! freed) and, where QnnSystem reports one, its spill-fill buffer. Runtimes and graphs hold
//! none of their own (a graph's memory is its context's).
//!
//! `Alive` (crate-private) is the one place that tracks liveness: creating one enters the object in the
//! ledger and raises its `*_alive` / `*_created` counters, releasing it (once, by `release` or
//! drop) removes the entry and lowers the counter, both under the ledger's lock. So
//! [`live`] and [`counters`](crate::counters()) always agree on how many objects are alive.
//! Only creation and release take the lock; executes never touch the ledger.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::base::sync::lock;
use crate::observe::counters;

/// The kinds of object the ledger tracks (declared with the counters they move).
pub use crate::observe::counters::Kind;

/// One live object, as [`live`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveEntry {
    /// Issued in creation order across all kinds, starting at 1: the n-th object created in
    /// this process has id n, so `id > runtimes_created + contexts_created + graphs_created`
    /// of an earlier [`counters`](crate::counters()) snapshot means "created since then".
    pub id: u64,
    pub kind: Kind,
    /// Where the object was created, as the creator described it (`file:line` by default).
    pub site: String,
    /// Runtime: the backend library path. Context: the source file, or `<binary N bytes>`,
    /// and its graph names. Graph: the graph name.
    pub detail: String,
    /// When the object was created (monotonic clock).
    pub created_at: Instant,
    /// The memory the object accounts for, by part.
    pub held: Held,
}

impl LiveEntry {
    /// Time since the object was created.
    pub fn age(&self) -> Duration {
        self.created_at.elapsed()
    }
}

/// A part of the memory a live object accounts for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// The context binary QNN was given: QNN deserializes it and keeps its copy on the host
    /// until the context is freed.
    Binary,
    /// The spill-fill buffer QnnSystem reports for the context's graphs (the largest; they
    /// share one).
    SpillFill,
    /// The binary of a context loaded from memory, kept to create the context again after a
    /// device reset (one loaded from a file reads the file again then).
    Source,
}

impl Part {
    pub fn name(self) -> &'static str {
        match self {
            Part::Binary => "binary",
            Part::SpillFill => "spill_fill",
            Part::Source => "source",
        }
    }
}

/// The host memory one live object accounts for, in bytes, by [`Part`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Held(pub Vec<(Part, u64)>);

impl Held {
    /// The sum of the parts.
    pub fn total(&self) -> u64 {
        self.0.iter().map(|&(_, n)| n).sum()
    }
}

struct Record {
    kind: Kind,
    site: String,
    detail: String,
    created_at: Instant,
    held: Held,
}

/// Live objects by id, and the last id issued.
struct Ledger {
    entries: BTreeMap<u64, Record>,
    last_id: u64,
}

static LEDGER: Mutex<Ledger> = Mutex::new(Ledger {
    entries: BTreeMap::new(),
    last_id: 0,
});

fn ledger() -> std::sync::MutexGuard<'static, Ledger> {
    // A panic while holding the lock cannot leave the map half-updated in a way that matters
    // here (each critical section is one insert or remove plus counter updates).
    lock(&LEDGER)
}

/// A snapshot of every live object, oldest first. Takes the ledger's lock for the copy only.
pub fn live() -> Vec<LiveEntry> {
    ledger()
        .entries
        .iter()
        .map(|(&id, r)| LiveEntry {
            id,
            kind: r.kind,
            site: r.site.clone(),
            detail: r.detail.clone(),
            created_at: r.created_at,
            held: r.held.clone(),
        })
        .collect()
}

/// One live object from creation until it is released (exactly once): its ledger entry and
/// its share of the `*_alive` counter.
#[derive(Debug)]
pub(crate) struct Alive(Option<(Kind, u64)>);

impl Alive {
    pub(crate) fn new(kind: Kind, site: &str, detail: String) -> Self {
        Self::holding(kind, site, detail, Held::default())
    }

    /// As [`Alive::new`], for an object that accounts for `held` bytes while it lives.
    pub(crate) fn holding(kind: Kind, site: &str, detail: String, held: Held) -> Self {
        let (alive, created) = counters::object_counters(kind);
        let mut ledger = ledger();
        ledger.last_id += 1;
        let id = ledger.last_id;
        ledger.entries.insert(
            id,
            Record {
                kind,
                site: site.to_string(),
                detail,
                created_at: Instant::now(),
                held,
            },
        );
        alive.fetch_add(1, Relaxed);
        created.fetch_add(1, Relaxed);
        Alive(Some((kind, id)))
    }

    /// An entry already released (a placeholder until the object exists, or after handing the
    /// real one on).
    pub(crate) fn released() -> Self {
        Alive(None)
    }

    /// Marks the object released; later calls and the drop do nothing.
    pub(crate) fn release(&mut self) {
        if let Some((kind, id)) = self.0.take() {
            let mut ledger = ledger();
            ledger.entries.remove(&id);
            counters::object_counters(kind).0.fetch_sub(1, Relaxed);
        }
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.release();
    }
}

/// Where an object was created, as the ledger reports it: every constructor takes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site(String);

impl Site {
    /// The calling Rust code's `file:line`.
    #[track_caller]
    pub fn here() -> Site {
        let location = std::panic::Location::caller();
        Site(format!("{}:{}", location.file(), location.line()))
    }

    /// A site the embedder describes (the NIF passes its Elixir caller).
    pub fn named(site: impl Into<String>) -> Site {
        Site(site.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}
