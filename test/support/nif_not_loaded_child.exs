# Run in a child VM whose hexagon_tpu has a NIF that cannot load (test/nif_not_loaded_test.exs
# and test/hex/nif_not_loaded_hex_test.exs): the module must load, the application start, and
# every public call return the :nif_not_loaded error, never raise. Prints CHILD lines for the
# parent to check; any raise or failed match exits with a non-zero status.
alias HexagonTpu.{Context, Error, Graph, Runtime, Stats}

{:module, HexagonTpu.Native} = :code.ensure_loaded(HexagonTpu.Native)
IO.puts("CHILD module loaded")

{:ok, _} = Application.ensure_all_started(:hexagon_tpu)
true = List.keymember?(Application.started_applications(), :hexagon_tpu, 0)
IO.puts("CHILD application started")

false = HexagonTpu.Native.nif_loaded()
{:error, %Error{reason: :nif_not_loaded, message: message}} = HexagonTpu.availability()
IO.puts("CHILD availability: " <> message)
false = HexagonTpu.available?()

# Handles cannot be made without the NIF; forged ones reach the stubs all the same.
runtime = %Runtime{ref: make_ref(), backend_lib: "x.so", system_lib: "x.so", info: %{}}
context = %Context{ref: make_ref(), runtime: runtime, source: "x.bin", graphs: []}
graph = %Graph{ref: make_ref(), name: "g", context: context, inputs: [], outputs: []}

calls = [
  {"Runtime.create/1", fn -> Runtime.create() end},
  {"Runtime.htp/1", fn -> Runtime.htp() end},
  {"HexagonTpu.load_model/2", fn -> HexagonTpu.load_model("/nonexistent/model.bin") end},
  {"Runtime.info/1", fn -> Runtime.info(runtime) end},
  {"Runtime.close/1", fn -> Runtime.close(runtime) end},
  {"Context.from_binary/3", fn -> Context.from_binary(runtime, "binary") end},
  {"Context.from_file/3", fn -> Context.from_file(runtime, "/nonexistent/model.bin") end},
  {"Context.close/1", fn -> Context.close(context) end},
  {"Graph.retrieve/2", fn -> Graph.retrieve(context, "g") end},
  {"HexagonTpu.predict/3", fn -> HexagonTpu.predict(graph, []) end},
  {"Graph.close/1", fn -> Graph.close(graph) end}
]

for {name, call} <- calls do
  {:error, %Error{reason: :nif_not_loaded, message: ^message}} = call.()
  IO.puts("CHILD #{name}: nif_not_loaded")
end

%Error{reason: :nif_not_loaded} =
  try do
    HexagonTpu.load_model!("/nonexistent/model.bin")
  rescue
    error in Error -> error
  end

IO.puts("CHILD HexagonTpu.load_model!/2 raised HexagonTpu.Error")

true = Runtime.closed?(runtime) and Context.closed?(context)
0 = Stats.native().runtimes_alive
[] = Stats.live()
IO.puts("CHILD stats: no objects")
IO.puts("CHILD done")
