defmodule HexagonTpu.SiteTest do
  # Creation sites in the ledger name the caller's code, not the standard library's, on every
  # Elixir (the frames Enum, Stream and comprehensions leave between the two differ between
  # 1.14 and 1.18). Each case builds its objects in a fresh process, whose heap is large
  # enough that no garbage collection frees them before the ledger is read, and keeps the
  # construct out of tail position (`keep/1`), as a line in the middle of a function is: the
  # frame of the fn written here stays on the stack. Runs alone: the objects created in the
  # window are this test's.
  use ExUnit.Case, async: false

  alias HexagonTpu.{Context, Graph, Runtime, Stats}
  alias HexagonTpu.Test.{Models, Support}

  @file_name "test/site_test.exs"
  @module_prefix ~r/^(anonymous fn\/\d+ in )?HexagonTpu\.SiteTest\./

  setup_all do
    t = Models.t(:ufixed_point_8, [1, 4], {:per_tensor, 0.05, -128})
    %{path: Models.build!(Models.identity(t, t))}
  end

  setup %{path: path} do
    Support.quiesce()
    runtime = Support.runtime!()
    on_exit(fn -> Runtime.close(runtime) end)
    %{runtime: runtime, path: path}
  end

  describe "objects created through the standard library get the caller's site" do
    # Each `fun` is on one line: the line its frame reports.
    test "for over a range and over a list", %{runtime: r, path: p} do
      line = __ENV__.line + 1
      fun = fn -> keep(for _ <- 1..2, do: Context.from_file!(r, p)) end
      assert_own_sites(contexts_created(fun), 2, line)

      line = __ENV__.line + 1
      fun = fn -> keep(for _ <- [1, 2], do: Context.from_file!(r, p)) end
      assert_own_sites(contexts_created(fun), 2, line)
    end

    test "Enum.map over a range and over a list", %{runtime: r, path: p} do
      line = __ENV__.line + 1
      fun = fn -> keep(Enum.map(1..2, fn _ -> Context.from_file!(r, p) end)) end
      assert_own_sites(contexts_created(fun), 2, line)

      line = __ENV__.line + 1
      fun = fn -> keep(Enum.map([1, 2], fn _ -> Context.from_file!(r, p) end)) end
      assert_own_sites(contexts_created(fun), 2, line)
    end

    test "Enum.each (the objects are dropped; the big heap keeps them until read)",
         %{runtime: r, path: p} do
      line = __ENV__.line + 1
      fun = fn -> keep(Enum.each(1..2, fn _ -> Context.from_file!(r, p) end)) end
      assert_own_sites(contexts_created(fun), 2, line)
    end

    test "Stream.map |> Enum.to_list", %{runtime: r, path: p} do
      line = __ENV__.line + 3

      fun = fn ->
        keep([1, 2] |> Stream.map(fn _ -> Context.from_file!(r, p) end) |> Enum.to_list())
      end

      assert_own_sites(contexts_created(fun), 2, line)
    end

    test "Erlang's :lists.map", %{runtime: r, path: p} do
      line = __ENV__.line + 1
      fun = fn -> keep(:lists.map(fn _ -> Context.from_file!(r, p) end, [1])) end
      assert_own_sites(contexts_created(fun), 1, line)
    end

    test "graphs and runtimes too", %{runtime: r, path: p} do
      c = Context.from_file!(r, p)

      line = __ENV__.line + 1
      fun = fn -> keep(Enum.map(1..2, fn _ -> Graph.retrieve!(c, "identity") end)) end
      assert_own_sites(created(:graph, fun), 2, line)

      opts = Support.runtime_opts()
      line = __ENV__.line + 1
      fun = fn -> keep(for _ <- 1..2, do: Runtime.create!(opts)) end
      assert_own_sites(created(:runtime, fun), 2, line)
    end
  end

  describe "when the stack holds no frame of the caller" do
    test "Task.async: the task's function, without a line", %{runtime: r, path: p} do
      # The fn tail-calls from_file!: the task's stack holds only Task.Supervised and
      # :proc_lib frames, so the site is the function the task was started with.
      fun = fn -> Task.await(Task.async(fn -> Context.from_file!(r, p) end)) end
      assert [site] = contexts_created(fun)
      assert site =~ ~r/^anonymous fn\/0 in HexagonTpu\.SiteTest\."test when the stack/, site
      assert String.ends_with?(site, "(#{@file_name})"), site

      # A frame of the task's fn left on the stack gives the line.
      line = __ENV__.line + 1
      fun = fn -> Task.await(Task.async(fn -> keep(Context.from_file!(r, p)) end)) end
      assert_own_sites(contexts_created(fun), 1, line)
    end

    test "a stack deeper than the VM reports: the caller from the full stack, no line",
         %{runtime: r, path: p} do
      # Each level of Enum.map or :lists.map leaves one frame of the standard library's (the
      # fns tail-call; alternated, as the VM reports a repeated frame once): as many levels
      # as the VM reports frames (ExUnit sets 20) push the fn below out of them.
      depth = :erlang.system_flag(:backtrace_depth, 8)
      :erlang.system_flag(:backtrace_depth, depth)
      nested = Enum.reduce(1..depth, fn -> Context.from_file!(r, p) end, &nest/2)
      assert [site] = contexts_created(fn -> keep(nested.()) end)
      assert site =~ ~r/^anonymous fn\/1 in HexagonTpu\.SiteTest\."test when the stack/, site
      assert String.ends_with?(site, "(#{@file_name})"), site
    end

    test "a process started with a function of the standard library: its first frame",
         %{runtime: r, path: p} do
      # No frame and no initial call of the caller's: the first frame outside this package.
      fun = fn ->
        keep(Task.await(Task.async(:erlang, :apply, [&Context.from_file!/2, [r, p]])))
      end

      assert [site] = contexts_created(fun)
      assert site =~ ~r/^Task\.Supervised\./, site
    end
  end

  defp nest(level, inner) when rem(level, 2) == 0,
    do: fn -> Enum.map([1], fn _ -> inner.() end) end

  defp nest(_, inner), do: fn -> :lists.map(fn _ -> inner.() end, [1]) end

  defp keep(objects), do: objects

  defp assert_own_sites(sites, count, line) do
    assert length(sites) == count, inspect(sites)

    for site <- sites do
      assert site =~ @module_prefix, site
      assert String.ends_with?(site, "(#{@file_name}:#{line})"), site
    end
  end

  defp contexts_created(fun), do: created(:context, fun)

  # The sites of the objects of `kind` that `fun` creates, run in a fresh process with a heap
  # big enough that it does not collect them before the ledger is read.
  defp created(kind, fun) do
    parent = self()
    before = created_total()

    {pid, ref} =
      :erlang.spawn_opt(
        fn ->
          kept = fun.()
          send(parent, :created)

          receive do
            :done -> kept
          end
        end,
        [:monitor, min_heap_size: 1_000_000, min_bin_vheap_size: 1_000_000]
      )

    assert_receive :created, 10_000
    last = created_total()

    sites =
      for %{kind: ^kind, id: id, site: site} <- Stats.live(), id > before and id <= last, do: site

    send(pid, :done)
    assert_receive {:DOWN, ^ref, :process, ^pid, :normal}, 5_000
    sites
  end

  defp created_total do
    counters = Stats.native()
    counters.runtimes_created + counters.contexts_created + counters.graphs_created
  end
end
