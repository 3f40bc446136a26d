//! The ledger of live objects, checked exactly against the counters: this file is its own test
//! binary with a single test, so no other test creates or releases objects underneath it.

mod common;

use std::sync::Arc;

use common::*;
use qnn::Site;
use qnn::ledger::{self, Kind, LiveEntry};
use qnn::{Context, Counters, Graph, Runtime, counters};
use qnn_sim::model::{DType, Quant, TensorSpec};

fn of_kind(entries: &[LiveEntry], kind: Kind) -> Vec<&LiveEntry> {
    entries.iter().filter(|e| e.kind == kind).collect()
}

/// The ledger holds exactly as many entries of each kind as the `*_alive` counters say, and
/// the newest id is the number of objects ever created.
fn assert_agrees_with_counters() -> (Vec<LiveEntry>, Counters) {
    assert!(qnn::counters::settle(std::time::Duration::from_secs(10)));
    let entries = ledger::live();
    let c = counters();
    let count = |kind| of_kind(&entries, kind).len() as u64;
    assert_eq!(count(Kind::Runtime), c.runtimes_alive, "{entries:?}");
    assert_eq!(count(Kind::Context), c.contexts_alive, "{entries:?}");
    assert_eq!(count(Kind::Graph), c.graphs_alive, "{entries:?}");
    if let Some(newest) = entries.iter().map(|e| e.id).max() {
        assert!(newest <= c.runtimes_created + c.contexts_created + c.graphs_created);
    }
    (entries, c)
}

#[test]
fn ledger_tracks_sites_and_agrees_with_counters() {
    let (base, _) = assert_agrees_with_counters();
    assert!(base.is_empty(), "nothing alive before the test: {base:?}");
    let spec = TensorSpec::new(DType::UFixed8, [4]).quant(Quant::per_tensor(1.0, 0));
    let model = identity_model(spec);

    // Explicit sites, as the NIF passes them.
    let lib = fresh_library();
    let runtime = Runtime::new(
        &config(&lib),
        &Site::named("MyApp.init/1 (lib/my_app.ex:3)"),
    )
    .unwrap();
    let path = std::env::temp_dir().join(format!("ledger_test_{}.bin", std::process::id()));
    std::fs::write(&path, &model).unwrap();
    let from_file = Context::from_file(&runtime, &path, &Site::named("file site")).unwrap();
    let from_bytes = Context::from_bytes(&runtime, &model, &Site::named("bytes site")).unwrap();
    let graph = Graph::retrieve(&from_file, "identity", &Site::named("graph site")).unwrap();
    std::fs::remove_file(&path).unwrap();

    let (entries, c) = assert_agrees_with_counters();
    assert_eq!(entries.len(), 4);
    assert_eq!(
        entries.iter().map(|e| e.id).max(),
        Some(c.runtimes_created + c.contexts_created + c.graphs_created),
        "ids are issued in creation order, one per object"
    );
    let runtimes = of_kind(&entries, Kind::Runtime);
    assert_eq!(runtimes[0].site, "MyApp.init/1 (lib/my_app.ex:3)");
    assert_eq!(runtimes[0].detail, lib.display().to_string());
    let contexts = of_kind(&entries, Kind::Context);
    assert_eq!(contexts[0].site, "file site");
    assert_eq!(
        contexts[0].detail,
        format!("{} (graphs: identity)", path.display())
    );
    assert_eq!(contexts[1].site, "bytes site");
    assert_eq!(
        contexts[1].detail,
        format!("<binary {} bytes> (graphs: identity)", model.len())
    );
    let graphs = of_kind(&entries, Kind::Graph);
    assert_eq!(
        (graphs[0].site.as_str(), graphs[0].detail.as_str()),
        ("graph site", "identity")
    );
    // A context holds its binary's bytes (this model's graph infos report no spill-fill); one
    // loaded from memory keeps them too, to be created again after a device reset (one from a
    // file reads it again). Runtimes and graphs hold none of their own.
    let size = model.len() as u64;
    assert_eq!(contexts[0].held, qnn::Held(vec![(qnn::Part::Binary, size)]));
    assert_eq!(
        contexts[1].held,
        qnn::Held(vec![(qnn::Part::Binary, size), (qnn::Part::Source, size)])
    );
    assert_eq!(contexts[0].held.total(), size);
    assert_eq!(runtimes[0].held, qnn::Held::default());
    assert_eq!(graphs[0].held.total(), 0);
    assert!(
        entries.windows(2).all(|w| w[0].id < w[1].id),
        "oldest first"
    );
    assert!(
        entries
            .iter()
            .all(|e| e.age() < std::time::Duration::from_secs(60))
    );

    // Close removes the entry at once.
    graph.close().unwrap();
    let (entries, _) = assert_agrees_with_counters();
    assert!(of_kind(&entries, Kind::Graph).is_empty());
    from_bytes.close().unwrap();
    let (entries, _) = assert_agrees_with_counters();
    assert_eq!(of_kind(&entries, Kind::Context).len(), 1);

    // A closed runtime whose context still holds its handles stays on the ledger (it is alive,
    // as `runtimes_alive` says) until the context goes.
    runtime.close().unwrap();
    let (entries, _) = assert_agrees_with_counters();
    assert_eq!(of_kind(&entries, Kind::Runtime).len(), 1);
    drop(graph);
    drop(from_bytes);
    drop(from_file);
    let (entries, _) = assert_agrees_with_counters();
    assert!(entries.is_empty(), "{entries:?}");
    drop(runtime);
    assert_all_freed(&lib);

    // Default sites: the caller's file:line, through #[track_caller]; drop removes entries.
    let (lib, runtime, runtime_site) = runtime_here();
    let line = line!() + 1;
    let context = Context::from_bytes(&runtime, &model, &Site::here()).unwrap();
    let graph = Graph::retrieve(&context, "identity", &Site::here()).unwrap();
    let (entries, _) = assert_agrees_with_counters();
    let here = |line: u32| format!("{}:{line}", file!());
    assert_eq!(of_kind(&entries, Kind::Runtime)[0].site, runtime_site);
    assert_eq!(of_kind(&entries, Kind::Context)[0].site, here(line));
    assert_eq!(of_kind(&entries, Kind::Graph)[0].site, here(line + 1));
    drop((graph, context, runtime));
    let (entries, _) = assert_agrees_with_counters();
    assert!(entries.is_empty(), "{entries:?}");
    assert_all_freed(&lib);

    // A failed creation leaves nothing on the ledger.
    let (lib, runtime, _) = runtime_here();
    assert!(Context::from_bytes(&runtime, b"not a context binary", &Site::here()).is_err());
    let (entries, _) = assert_agrees_with_counters();
    assert_eq!(entries.len(), 1);
    drop(runtime);
    assert!(qnn::counters::settle(std::time::Duration::from_secs(10)));
    assert!(ledger::live().is_empty());
    assert_all_freed(&lib);
}

/// A runtime created with the default site, and that site.
fn runtime_here() -> (std::path::PathBuf, Arc<Runtime>, String) {
    let lib = fresh_library();
    let runtime = Runtime::new(&config(&lib), &Site::here()).unwrap();
    let site = format!("{}:{}", file!(), line!() - 1);
    (lib, runtime, site)
}
