defmodule HexagonTpu.LoadingTest do
  # Loading never trusts the path: only a regular file within the size limit is read, and
  # nothing that could block (a FIFO without a writer) or never end (/dev/zero) is read at all.
  use ExUnit.Case, async: false

  alias HexagonTpu.{Context, Error, Stats}
  alias HexagonTpu.Test.{Models, Support}

  setup do
    dir =
      Path.join(System.tmp_dir!(), "hexagon_tpu_loading_#{System.unique_integer([:positive])}")

    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    %{dir: dir, runtime: Support.runtime!()}
  end

  defp refused(runtime, path, opts \\ []) do
    task = Task.async(fn -> Context.from_file(runtime, path, opts) end)
    # A load that blocked on the file would still be running: that is the failure.
    case Task.yield(task, 10_000) || Task.shutdown(task, :brutal_kill) do
      {:ok, {:error, %Error{} = error}} -> error
      other -> flunk("expected a refusal, got #{inspect(other)}")
    end
  end

  test "a FIFO with no writer is refused by name, without blocking", %{dir: dir, runtime: rt} do
    fifo = Path.join(dir, "model.bin")
    {_, 0} = System.cmd("mkfifo", [fifo])
    error = refused(rt, fifo)
    assert error.reason == :io
    assert error.message =~ "is a FIFO; a context binary must be a regular file"
  end

  test "devices, directories and sockets are refused before any read", %{dir: dir, runtime: rt} do
    assert refused(rt, "/dev/zero").message =~ "/dev/zero: is a character device"
    assert refused(rt, dir).message =~ "is a directory"

    socket = Path.join(dir, "s.sock")
    {:ok, listen} = :gen_tcp.listen(0, ifaddr: {:local, String.to_charlist(socket)})
    assert refused(rt, socket).message =~ "is a socket"
    :gen_tcp.close(listen)
  end

  test "a file over the size limit is refused from its size alone", %{dir: dir, runtime: rt} do
    # Sparse: 3 GiB of nothing on disk. Reading it would add 3 GiB to memory.
    sparse = Path.join(dir, "huge.bin")
    {:ok, file} = :file.open(sparse, [:write, :raw])
    {:ok, _} = :file.position(file, 3 * 1024 * 1024 * 1024)
    :ok = :file.write(file, <<0>>)
    :ok = :file.close(file)

    # The OS's count of the VM's peak memory (the NIF's allocations are not the VM's own).
    before = Support.reset_peak_rss!()
    error = refused(rt, sparse)
    assert Support.peak_rss!() - before < 100 * 1024 * 1024
    assert error.reason == :io
    assert error.message =~ "is 3221225473 bytes, more than the 2147483648 allowed"

    # The limit is an option.
    model = Models.build!(Models.identity(Models.t(:float_32, [4]), Models.t(:float_32, [4])))
    size = File.stat!(model).size
    assert refused(rt, model, max_bytes: size - 1).message =~ "more than the #{size - 1} allowed"
    assert {:ok, context} = Context.from_file(rt, model, max_bytes: size)
    assert :ok = Context.close(context)
  end

  test "an empty file is an invalid model", %{dir: dir, runtime: rt} do
    empty = Path.join(dir, "empty.bin")
    File.write!(empty, "")
    error = refused(rt, empty)
    assert error.reason == :invalid_model
    assert error.message =~ "is empty"
  end

  test "a model over 1 MiB is mapped, and loads and predicts like a small one", %{runtime: rt} do
    # 256 classes x 4096 features of s8 weights: a 1 MiB constant in the binary.
    classes = 256
    features = 4096
    scales = List.duplicate(0.01, classes)
    weights = for c <- 1..classes, f <- 1..features, do: rem(c + f, 7) - 3
    model = Models.classifier(scales, weights, List.duplicate(0, classes), softmax: false)
    path = Models.build!(model)
    assert File.stat!(path).size > 1024 * 1024

    {_, before, after_} =
      Stats.with_leak_check(fn ->
        {:ok, context} = Context.from_file(rt, path)
        {:ok, graph} = HexagonTpu.Graph.retrieve(context, "classifier")
        x = :binary.copy(<<255>>, features)

        assert {:ok, [logits]} =
                 HexagonTpu.Graph.execute(graph, [x],
                   quantize: :none,
                   dequantize: :none,
                   output: :binary
                 )

        assert byte_size(logits) == classes
        :ok = Context.close(context)
      end)

    # The runtime is the test's own, from setup; runtimes of earlier tests may still be going
    # (a shared runtime replaced in :persistent_term is freed when the VM gets to it).
    assert Map.take(Stats.alive_diff(before, after_), [:contexts_alive, :graphs_alive]) ==
             %{contexts_alive: 0, graphs_alive: 0}
  end
end
