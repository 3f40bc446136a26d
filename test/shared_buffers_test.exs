defmodule HexagonTpu.SharedBuffersTest do
  # Shared buffers (rpcmem + QnnMem_register) through the Elixir API, on private copies of
  # qnn_sim (their counters and knobs are this test's alone): the fallback to client buffers
  # where rpcmem or QnnMem is missing (logged once per reason, counted, kept in the context's
  # :buffers), `shared_buffers: true | false`, and with the memfd-backed fake rpcmem real
  # shared buffers: outputs bit for bit those of client buffers, no client-buffer bytes, a
  # pool reused across executes that leaks nothing, output binaries that outlive their
  # context, registrations made again after a device reset, and the backend's own queue.
  # The counters are VM-wide: runs alone.
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog
  import HexagonTpu.Test.Numerics, only: [f32: 1, from_f32: 1]

  alias HexagonTpu.{Context, Error, Graph, Runtime, Stats}
  alias HexagonTpu.Test.{Models, Support}

  @moduletag :tmp_dir

  # u8 identity [1, 4], scale 0.25, zero point 128: f32 inputs are quantized on the host,
  # outputs dequantized, exactly for multiples of 0.25 in [-32, 31.75] (two tensors).
  @q Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.25, -128})

  # A :logger handler that sends the test the QNN lines Logger logs, in order:
  # {:qnn_log, text}. (capture_log hands its text over only at its end.)
  defmodule Forward do
    @moduledoc false
    def log(%{msg: msg}, %{config: %{pid: pid}}) do
      text =
        case msg do
          {:string, text} -> IO.chardata_to_string(text)
          {format, args} when is_list(args) -> IO.chardata_to_string(:io_lib.format(format, args))
          other -> inspect(other)
        end

      if String.starts_with?(text, "QNN: "), do: send(pid, {:qnn_log, text})
    end
  end

  setup %{tmp_dir: dir} do
    Support.quiesce()
    settle_shared()
    lib = Support.private_sim_lib!(dir)

    on_exit(fn ->
      knob(lib, "mem_register_unsupported", "false")
      knob(lib, "ssr_after_executes", "off")
    end)

    %{lib: lib, u8: Models.build!(Models.identity(@q, @q)), two: Models.build!(two_outputs())}
  end

  defp knob(lib, key, value), do: :ok = HexagonTpu.Native.qnn_sim_configure(lib, key, value)

  # u8 x [1, 4] (scale 1/255) -> fully connected -> u8 logits [1, 3] -> softmax -> f32 probs
  # [1, 3]; both logits and probs are outputs: a quantized and an f32 output (three tensors).
  defp two_outputs do
    spec = Models.classifier([0.01, 0.02, 0.015], classifier_weights(), [0.1, -0.1, 0.0])
    put_in(spec, [:graphs, Access.at(0), :outputs], ["logits", "probs"])
  end

  defp classifier_weights, do: [0.5, -0.25, 0.1, 0.0, 1.0, 0.5, -0.5, 0.2, -1.0, 0.3, 0.3, 0.3]

  defp fake_rpcmem, do: Support.fake_rpcmem_lib()

  # A runtime on qnn_sim `lib` whose rpcmem is the fake one (shared buffers work).
  defp shared_runtime!(lib),
    do: Runtime.create!(Support.runtime_opts(lib) ++ [rpcmem_lib_path: fake_rpcmem()])

  defp graph!(context), do: Graph.retrieve!(context, hd(Context.graphs(context)))

  # The reason a runtime whose rpcmem is `libcdsprpc.so` (the default) cannot have it here.
  defp default_rpcmem, do: System.get_env("HEXAGON_TPU_RPCMEM_LIB") || "libcdsprpc.so"

  # Waits until no shared buffer is being freed any more (a context or an output binary of an
  # earlier test collected, its frees run on its runtime's thread): shared_buffers_alive and
  # the runtimes' pending jobs the same over three sweeps. Returns shared_buffers_alive.
  defp settle_shared(last \\ nil, same \\ 0, tries \\ 200) do
    Stats.sweep()
    counters = Stats.native()
    now = {counters.shared_buffers_alive, counters.runtime_jobs_pending, counters.contexts_alive}

    cond do
      now == last and same >= 2 and counters.runtime_jobs_pending == 0 ->
        counters.shared_buffers_alive

      tries == 0 ->
        counters.shared_buffers_alive

      true ->
        Process.sleep(10)
        settle_shared(now, if(now == last, do: same + 1, else: 0), tries - 1)
    end
  end

  # Waits until shared_buffers_alive is `n` (sweeping between tries).
  defp alive_becomes?(n),
    do: Support.wait_until(fn -> Stats.native().shared_buffers_alive == n end, sweep: true)

  defp forward_qnn_log do
    id = :"shared_buffers_#{System.unique_integer([:positive])}"
    :ok = :logger.add_handler(id, Forward, %{config: %{pid: self()}})
    on_exit(fn -> :logger.remove_handler(id) end)
  end

  # The QNN lines received until (and with) the first that contains `fragment`, in order.
  defp lines_until(fragment, acc \\ []) do
    receive do
      {:qnn_log, text} ->
        if text =~ fragment,
          do: Enum.reverse([text | acc]),
          else: lines_until(fragment, [text | acc])
    after
      5_000 -> flunk("no QNN line with #{inspect(fragment)}; got #{inspect(Enum.reverse(acc))}")
    end
  end

  defp fallback_line(why), do: "hexagon_tpu: shared buffers are not available (#{why}"

  defp count(text, fragment), do: length(String.split(text, fragment)) - 1

  # Inputs of the u8 identity: f32 values on its grid, and bytes in its own type.
  defp f32_in(i), do: f32([i * 0.25, 1.0, -2.5, 0.25])
  defp u8_in(i), do: <<rem(i, 256), 0, 128, 255>>

  describe "without rpcmem (the default library is missing here)" do
    test "a context falls back to client buffers, says why once per reason, and counts each",
         ctx do
      runtime = Support.runtime!(ctx.lib)
      n = System.unique_integer([:positive])
      unique = "/nonexistent/librpcmem-#{n}-a.so"
      other = "/nonexistent/librpcmem-#{n}-b.so"

      runtime_unique = Runtime.create!(Support.runtime_opts(ctx.lib) ++ [rpcmem_lib_path: unique])

      runtime_other = Runtime.create!(Support.runtime_opts(ctx.lib) ++ [rpcmem_lib_path: other])
      forward_qnn_log()
      before = Stats.native()

      {{contexts, lines}, log} =
        with_log(fn ->
          # twice the default reason (logged at most once in this VM: maybe already), twice a
          # reason no load met before, then a third one: QNN's lines arrive in order, so once
          # the third one's is here every earlier one is too
          contexts =
            for runtime <- [runtime, runtime, runtime_unique, runtime_unique, runtime_other],
                do: Context.from_file!(runtime, ctx.u8)

          lines = lines_until(fallback_line(other))
          :sys.get_state(HexagonTpu.QnnLog)
          {contexts, lines}
        end)

      after_ = Stats.native()
      assert after_.shared_buffer_fallbacks - before.shared_buffer_fallbacks == 5
      assert after_.shared_buffer_contexts == before.shared_buffer_contexts
      assert after_.shared_buffer_registrations == before.shared_buffer_registrations
      assert after_.shared_buffers_alive == before.shared_buffers_alive

      [default1, default2, unique1, unique2, other1] = Enum.map(contexts, & &1.buffers)
      assert {:client, why} = default1
      assert why =~ "#{default_rpcmem()} could not be opened"
      assert default2 == default1
      assert {:client, why} = unique1
      assert why =~ "#{unique} could not be opened"
      assert unique2 == unique1
      assert {:client, why} = other1
      assert String.starts_with?(why, "#{other} could not be opened")

      # each reason at most once: the default one maybe earlier in this VM, the new ones here
      assert Enum.count(lines, &(&1 =~ fallback_line(default_rpcmem()))) <= 1
      assert count(log, fallback_line(default_rpcmem())) <= 1
      assert [line] = Enum.filter(lines, &(&1 =~ fallback_line(unique)))
      assert count(log, fallback_line(unique)) == 1
      assert count(log, fallback_line(other)) == 1
      assert line =~ "executes with client buffers"
      assert line =~ "shared_buffers: false"

      # the predicts are right: the same as a context that asked for client buffers
      client = runtime |> Context.from_file!(ctx.u8, shared_buffers: false) |> graph!()

      for context <- contexts, i <- 0..2 do
        graph = graph!(context)
        opts = [quantize: :none, dequantize: :none, output: :binary]
        assert Graph.execute!(graph, [u8_in(i)], opts) == [u8_in(i)]

        assert Graph.execute!(graph, [f32_in(i)], output: :binary) ==
                 Graph.execute!(client, [f32_in(i)], output: :binary)
      end

      assert Support.qnn_sim_counters(ctx.lib).mem_handle_executes == 0
    end

    test "shared_buffers: false asks for client buffers: nothing is opened or counted", ctx do
      runtime = Support.runtime!(ctx.lib)
      before = Stats.native()
      context = Context.from_file!(runtime, ctx.u8, shared_buffers: false)
      assert context.buffers == :client

      from_binary = Context.from_binary!(runtime, File.read!(ctx.u8), shared_buffers: false)
      assert from_binary.buffers == :client

      after_ = Stats.native()
      assert after_.shared_buffer_fallbacks == before.shared_buffer_fallbacks
      assert after_.shared_buffer_contexts == before.shared_buffer_contexts

      # not even with a working rpcmem
      context = Context.from_file!(shared_runtime!(ctx.lib), ctx.u8, shared_buffers: false)
      assert context.buffers == :client
      assert Stats.native().shared_buffers_alive == before.shared_buffers_alive
      assert Support.qnn_sim_counters(ctx.lib).mem_registrations == 0
    end

    test "shared_buffers: true fails the load with :shared_buffers_unavailable, naming rpcmem",
         ctx do
      runtime = Support.runtime!(ctx.lib)
      before = Stats.native()

      for load <- [
            fn -> Context.from_file(runtime, ctx.u8, shared_buffers: true) end,
            fn -> Context.from_binary(runtime, File.read!(ctx.u8), shared_buffers: true) end,
            fn -> HexagonTpu.load_model(ctx.u8, runtime: runtime, shared_buffers: true) end
          ] do
        assert {:error, %Error{reason: :shared_buffers_unavailable} = error} = load.()
        assert error.message =~ "shared buffers are not available"
        assert error.message =~ "#{default_rpcmem()} could not be opened"
      end

      after_ = Stats.native()
      # an error, not a fallback; and the contexts made for the attempts were freed
      assert after_.shared_buffer_fallbacks == before.shared_buffer_fallbacks
      assert after_.contexts_alive == before.contexts_alive
    end
  end

  describe "a backend whose QnnMem_register answers 1000 (Qualcomm's x86 emulator's answer)" do
    test "true fails naming memRegister, :auto falls back with that reason, nothing leaks",
         ctx do
      runtime = shared_runtime!(ctx.lib)
      alive = Stats.native().shared_buffers_alive
      knob(ctx.lib, "mem_register_unsupported", "true")
      before = Stats.native()

      assert {:error, %Error{reason: :shared_buffers_unavailable} = error} =
               Context.from_file(runtime, ctx.two, shared_buffers: true)

      assert error.message =~ "memRegister"
      assert error.message =~ "1000"

      # (its line, logged once per reason in this VM, may have been by an earlier test)
      {context, _log} =
        with_log(fn ->
          context = Context.from_file!(runtime, ctx.two)
          Support.wait_until(fn -> Stats.native().log_lines > before.log_lines end, timeout: 500)
          :sys.get_state(HexagonTpu.QnnLog)
          context
        end)

      assert {:client, why} = context.buffers
      assert why =~ "memRegister"
      assert why =~ "1000"
      refute why =~ "could not be opened"

      after_ = Stats.native()
      assert after_.shared_buffer_fallbacks - before.shared_buffer_fallbacks == 1
      assert after_.shared_buffer_contexts == before.shared_buffer_contexts
      assert Support.qnn_sim_counters(ctx.lib).mem_register_refusals >= 2
      # the buffers allocated for the attempts were freed
      assert after_.shared_buffers_alive == alive

      # it executes, with client buffers
      graph = graph!(context)
      before = Stats.native()
      assert {:ok, [_, _]} = Graph.execute(graph, [<<1, 2, 3, 4>>], quantize: :none)
      assert Stats.native().client_buffer_bytes_total - before.client_buffer_bytes_total == 19
      assert Support.qnn_sim_counters(ctx.lib).mem_handle_executes == 0

      # once the backend registers again, so do new contexts
      knob(ctx.lib, "mem_register_unsupported", "false")
      assert Context.from_file!(runtime, ctx.two, shared_buffers: true).buffers == :shared
    end
  end

  describe "with rpcmem and QnnMem (the fake rpcmem on qnn_sim)" do
    test "a camera frame is preprocessed straight into the input's buffer: the pass's bytes, " <>
           "no host copy with shared buffers, the same client-buffer bytes without",
         ctx do
      # an NV12 1280x720 frame letterboxed into a u8 {1, 24, 32, 3} input
      t = Models.t(:ufixed_point_8, [1, 24, 32, 3], {:per_tensor, 0.018658, -114})
      model = Models.build!(Models.identity(t, t))
      runtime = shared_runtime!(ctx.lib)
      shared = graph!(Context.from_file!(runtime, model))
      client = graph!(Context.from_file!(runtime, model, shared_buffers: false))
      frame = for i <- 1..div(1280 * 720 * 3, 2), into: <<>>, do: <<rem(i * 7919, 251)>>
      opts = [width: 1280, height: 720, pixel_format: :nv12, fit: :letterbox]
      [input] = Graph.inputs(shared)
      {:ok, bytes} = HexagonTpu.Preprocess.image(frame, input, opts)
      predict = [dequantize: :none, output: :binary]

      for graph <- [shared, client] do
        before = Stats.native()
        assert {:ok, [by_binary]} = HexagonTpu.predict(graph, [{input.type, bytes}], predict)
        middle = Stats.native()
        assert {:ok, [by_frame]} = HexagonTpu.Preprocess.predict(graph, frame, opts ++ predict)
        last = Stats.native()

        # the identity's output is the input: the pass's bytes, written where QNN reads them
        assert by_frame == bytes and by_binary == bytes
        copied = fn a, b -> b.host_copy_bytes_total - a.host_copy_bytes_total end
        client_bytes = fn a, b -> b.client_buffer_bytes_total - a.client_buffer_bytes_total end

        if graph == shared do
          assert {copied.(before, middle), copied.(middle, last)} == {byte_size(bytes), 0}
          assert {client_bytes.(before, middle), client_bytes.(middle, last)} == {0, 0}
        else
          assert {copied.(before, middle), copied.(middle, last)} == {0, 0}
          both = 2 * byte_size(bytes)
          assert {client_bytes.(before, middle), client_bytes.(middle, last)} == {both, both}
        end
      end

      # a frame made for the input, given to execute_async/3 as its value
      {:ok, prepared} = HexagonTpu.Preprocess.frame(frame, shared, opts)
      assert prepared.transform == elem(HexagonTpu.Preprocess.transform(shared, opts), 1)
      {:ok, pending} = Graph.execute_async(shared, [prepared], predict)
      assert {:ok, [^bytes]} = Graph.await(pending)

      # the pass's refusals are the execute's answer; a frame made for another input is refused
      assert {:error, %Error{reason: :invalid_input, message: message}} =
               HexagonTpu.Preprocess.predict(shared, binary_part(frame, 0, 1000), opts)

      assert {:error, %Error{message: ^message}} =
               HexagonTpu.Preprocess.image(binary_part(frame, 0, 1000), input, opts)

      other = Models.t(:ufixed_point_8, [1, 24, 32, 3], {:per_tensor, 0.5, 0})
      other = graph!(Context.from_file!(runtime, Models.build!(Models.identity(other, other))))

      assert {:error, %Error{reason: :invalid_input, message: message}} =
               Graph.execute(other, [prepared])

      assert message =~ "the frame was prepared for input"
    end

    test "the context has shared buffers; outputs equal client buffers' bit for bit; no " <>
           "client-buffer bytes; host copies only of inputs in the model's type",
         ctx do
      runtime = shared_runtime!(ctx.lib)
      before = Stats.native()
      shared_context = Context.from_file!(runtime, ctx.two)
      client_context = Context.from_file!(runtime, ctx.two, shared_buffers: false)
      assert shared_context.buffers == :shared
      assert client_context.buffers == :client
      after_load = Stats.native()
      assert after_load.shared_buffer_contexts - before.shared_buffer_contexts == 1
      assert after_load.shared_buffer_fallbacks == before.shared_buffer_fallbacks
      # one buffer per tensor (an input, two outputs), allocated and registered at the load
      assert after_load.shared_buffers_alive - before.shared_buffers_alive == 3
      assert after_load.shared_buffer_registrations - before.shared_buffer_registrations == 3
      assert Support.qnn_sim_counters(ctx.lib).mem_live_registrations == 3

      {shared, client} = {graph!(shared_context), graph!(client_context)}
      features = f32([0.2, 0.9, 0.5, 0.1])
      quantized = <<51, 230, 128, 26>>

      for {input, quantize} <- [{features, :auto}, {quantized, :none}],
          dequantize <- [:auto, :none] do
        opts = [quantize: quantize, dequantize: dequantize, output: :binary]
        {sim_before, before} = {Support.qnn_sim_counters(ctx.lib), Stats.native()}
        assert {:ok, in_shared} = Graph.execute(shared, [input], opts)
        {sim_after, after_} = {Support.qnn_sim_counters(ctx.lib), Stats.native()}

        assert sim_after.mem_handle_executes == sim_before.mem_handle_executes + 1
        assert after_.client_buffer_bytes_total == before.client_buffer_bytes_total
        copied = after_.host_copy_bytes_total - before.host_copy_bytes_total
        assert copied == if(quantize == :none, do: 4, else: 0)

        assert {:ok, in_client} = Graph.execute(client, [input], opts)
        last = Stats.native()
        # the u8 input, the u8 logits and the f32 probabilities
        assert last.client_buffer_bytes_total - after_.client_buffer_bytes_total == 4 + 3 + 12
        assert last.host_copy_bytes_total == after_.host_copy_bytes_total

        assert Support.qnn_sim_counters(ctx.lib).mem_handle_executes ==
                 sim_after.mem_handle_executes

        assert in_shared == in_client, "#{quantize} in, #{dequantize} out"
        [logits, probs] = in_shared
        assert byte_size(logits) == if(dequantize == :none, do: 3, else: 12)
        assert byte_size(probs) == 12
        assert_in_delta Enum.sum(from_f32(probs)), 1.0, 1.0e-5
      end

      # the same through HexagonTpu.load_model/2's own runtime, rpcmem given as its option
      {:ok, model} =
        HexagonTpu.load_model(ctx.two,
          lib_path: Support.sim_lib(),
          system_lib_path: Support.sim_lib(),
          rpcmem_lib_path: fake_rpcmem(),
          shared_buffers: true
        )

      assert model.context.buffers == :shared

      assert HexagonTpu.predict!(model, [features], output: :binary) ==
               Graph.execute!(client, [features], output: :binary)

      :ok = Context.close(model.context)
      assert Support.qnn_sim_counters(ctx.lib).mem_stale_uses == 0
    end

    test "1,000 predicts reuse the pool: buffers and registrations stay bounded, and " <>
           "everything is freed with the context",
         ctx do
      tensors = 3

      {base, before, after_} =
        Stats.with_leak_check(fn ->
          base = Stats.native()
          runtime = shared_runtime!(ctx.lib)
          context = Context.from_file!(runtime, ctx.two)
          graph = graph!(context)
          loaded = Stats.native()
          # one buffer per tensor, allocated and registered at the load
          assert loaded.shared_buffers_alive - base.shared_buffers_alive == tensors
          assert loaded.shared_buffer_registrations - base.shared_buffer_registrations == tensors

          # every way in and out: f32 inputs quantized into their buffer or bytes copied in,
          # outputs dequantized from theirs (back at once) or handed out in them (the f32
          # probabilities always: their own type), under binaries dropped at once and back in
          # the pool when collected (here after each predict)
          modes =
            for quantize <- [:auto, :none],
                dequantize <- [:auto, :none],
                do: {quantize, dequantize}

          peak =
            Enum.reduce(1..1_000, 0, fn i, peak ->
              {quantize, dequantize} = Enum.at(modes, rem(i, 4))

              input =
                if quantize == :auto,
                  do: f32([rem(i, 255) / 255, 0.5, 0.25, 1.0]),
                  else: <<rem(i, 256), 0, 9, 255>>

              opts = [quantize: quantize, dequantize: dequantize, output: :binary]
              assert {:ok, [logits, probs]} = Graph.execute(graph, [input], opts)
              assert byte_size(logits) == if(dequantize == :none, do: 3, else: 12)
              assert byte_size(probs) == 12
              :erlang.garbage_collect()
              max(peak, Stats.native().shared_buffers_alive)
            end)

          assert peak - base.shared_buffers_alive <= tensors * 5
          # the pool's buffers, reused: one in use and at most KEEP_FREE (4) kept per tensor
          # (now and then a predict makes one more, which the pool keeps), and as many
          # registrations
          during = Stats.native()
          assert during.shared_buffers_alive - base.shared_buffers_alive <= tensors * 5

          assert during.shared_buffer_registrations - base.shared_buffer_registrations <=
                   tensors * 5

          sim = Support.qnn_sim_counters(ctx.lib)
          assert sim.mem_handle_executes == 1_000
          assert sim.mem_live_registrations <= tensors * 5
          assert sim.mem_stale_uses == 0

          :ok = Context.close(context)
          :ok = Runtime.close(runtime)
          base
        end)

      Support.assert_no_leaks(before, after_)
      assert alive_becomes?(base.shared_buffers_alive)
      sim = Support.qnn_sim_counters(ctx.lib)
      assert sim.mem_live_registrations == 0
      assert sim.mem_stale_uses == 0
    end

    test "an output binary outlives its graph and context; its buffer is freed when it is " <>
           "collected",
         ctx do
      base = settle_shared()
      parent = self()

      # The binaries live in this process alone, so that they can be dropped for sure.
      holder =
        spawn_link(fn ->
          runtime = shared_runtime!(ctx.lib)
          context = Context.from_file!(runtime, ctx.u8)
          graph = graph!(context)
          opts = [quantize: :none, dequantize: :none, output: :binary]
          held = for i <- 1..3, do: Graph.execute!(graph, [u8_in(i)], opts)
          send(parent, {:executed, Stats.native().shared_buffers_alive})
          :ok = Context.close(context)
          send(parent, :closed)

          hold(held)
        end)

      # two buffers at the load; the input's back in the pool, three outputs under binaries
      assert_receive {:executed, executed}, 5_000
      assert executed == base + 1 + 3
      assert_receive :closed, 5_000

      # closed, its graph and runtime dropped: the pooled buffer freed and every registration
      # deregistered; the held ones kept, and readable
      assert alive_becomes?(base + 3)
      assert Support.qnn_sim_counters(ctx.lib).mem_live_registrations == 0
      send(holder, {:check, self()})
      assert_receive {:held, true}, 5_000
      assert settle_shared() == base + 3
      send(holder, {:check, self()})
      assert_receive {:held, true}, 5_000

      ref = Process.monitor(holder)
      send(holder, :drop)
      assert_receive {:DOWN, ^ref, :process, _, _}, 5_000
      assert alive_becomes?(base)
      assert Support.qnn_sim_counters(ctx.lib).mem_stale_uses == 0
    end

    # Holds `held` (its only reference) until told to drop it; says whether it still holds
    # the right bytes.
    defp hold(held) do
      receive do
        {:check, from} ->
          send(from, {:held, held == for(i <- 1..3, do: [u8_in(i)])})
          hold(held)

        :drop ->
          :ok
      end
    end

    test "a graph of a closed context answers :closed", ctx do
      context = Context.from_file!(shared_runtime!(ctx.lib), ctx.u8)
      assert context.buffers == :shared
      graph = graph!(context)
      :ok = Context.close(context)

      for opts <- [[], [quantize: :none, dequantize: :none]] do
        input = if opts == [], do: f32_in(1), else: u8_in(1)
        assert {:error, %Error{reason: :closed}} = Graph.execute(graph, [input], opts)
      end
    end

    test "after a device reset the buffers are registered again in the context created again",
         ctx do
      runtime = shared_runtime!(ctx.lib)
      context = Context.from_file!(runtime, ctx.u8)
      assert context.buffers == :shared
      graph = graph!(context)
      assert Graph.execute!(graph, [f32_in(0)], output: :binary) == [f32_in(0)]
      before = Stats.native()
      knob(ctx.lib, "ssr_after_executes", "0")

      log =
        capture_log(fn ->
          assert Graph.execute!(graph, [f32_in(1)], output: :binary) == [f32_in(1)]
          Support.wait_until(fn -> Stats.native().log_lines > before.log_lines end)
          :sys.get_state(HexagonTpu.QnnLog)
        end)

      assert log =~ "the device was reset"
      after_ = Stats.native()
      assert after_.context_recoveries - before.context_recoveries == 1
      assert after_.device_resets == before.device_resets
      # the input's and the output's, once each, in the new context handle
      assert after_.shared_buffer_registrations - before.shared_buffer_registrations == 2
      sim = Support.qnn_sim_counters(ctx.lib)
      assert sim.ssr_restarts == 1
      assert sim.mem_live_registrations == 2

      # and used there: no more registrations (f32 outputs come back to the pool at once)
      for i <- 2..4 do
        assert Graph.execute!(graph, [f32_in(i)], output: :binary) == [f32_in(i)]

        assert Graph.execute!(graph, [u8_in(i)], quantize: :none, output: :binary) ==
                 [f32([(i - 128) * 0.25, -32.0, 0.0, 31.75])]
      end

      assert Stats.native().shared_buffer_registrations == after_.shared_buffer_registrations
      sim = Support.qnn_sim_counters(ctx.lib)
      assert sim.mem_stale_uses == 0
      assert sim.mem_live_registrations == 2
      :ok = Context.close(context)
      assert Support.qnn_sim_counters(ctx.lib).mem_live_registrations == 0
    end

    test "executes in the backend's own queue (async_queue_depth:) use them too, in order",
         ctx do
      runtime = shared_runtime!(ctx.lib)
      context = Context.from_file!(runtime, ctx.u8, async_queue_depth: 4, shared_buffers: true)
      assert context.execute_queue == {:backend, 4}
      assert context.buffers == :shared
      graph = graph!(context)
      {sim_before, before} = {Support.qnn_sim_counters(ctx.lib), Stats.native()}
      knob(ctx.lib, "async_delay_ms", "1")

      # f32 inputs (quantized into their buffers) and bytes in the model's type (copied in)
      inputs =
        for i <- 1..20 do
          if rem(i, 2) == 0,
            do: {[u8_in(i)], [quantize: :none, dequantize: :none], u8_in(i)},
            else: {[f32_in(i)], [], f32_in(i)}
        end

      pendings =
        for {input, opts, want} <- inputs do
          {:ok, pending} = Graph.execute_async(graph, input, [output: :binary] ++ opts)
          {pending, want}
        end

      for {pending, want} <- pendings, do: assert({:ok, [^want]} = Graph.await(pending))

      knob(ctx.lib, "async_delay_ms", "0")
      {sim, after_} = {Support.qnn_sim_counters(ctx.lib), Stats.native()}
      assert sim.mem_handle_executes - sim_before.mem_handle_executes == 20
      assert sim.async_notifications - sim_before.async_notifications == 20
      assert sim.mem_stale_uses == 0
      assert after_.client_buffer_bytes_total == before.client_buffer_bytes_total
      # ten inputs of 4 bytes in the model's type
      assert after_.host_copy_bytes_total - before.host_copy_bytes_total == 10 * 4
      :ok = Context.close(context)
    end
  end

  test "the :shared_buffers option is checked", ctx do
    runtime = Support.runtime!(ctx.lib)

    for fun <- [
          fn -> HexagonTpu.load_model(ctx.u8, runtime: runtime, shared_buffers: :yes) end,
          fn -> Context.from_file(runtime, ctx.u8, shared_buffers: 1) end,
          fn -> Context.from_binary(runtime, File.read!(ctx.u8), shared_buffers: nil) end
        ] do
      assert_raise ArgumentError, ~r/the :shared_buffers option.*:auto, true or false/, fun
    end
  end
end
