# Run by .ci/hex-install.sh with `mix run` in a user's project that got hexagon_tpu through
# Hex: only the public API, as a user would.
#
#   predict NIF_FILE MODEL.bin LIBQNN_SIM.so   the NIF loaded from NIF_FILE (a file name under
#                                              hexagon_tpu's priv/native) and the pattern
#                                              classifier (examples/pattern_classifier.json)
#                                              right on each of its four patterns, on qnn_sim
#   not_loaded REASON                          the application runs, availability/1 says why
#                                              the NIF did not load, naming REASON
#   nx_later MODEL.bin LIBQNN_SIM.so           Nx, added to the project after hexagon_tpu
#                                              compiled: tensors in, tensors out, a batch of four
#
# Prints one USER line per finding; any failed match raises, and `mix run` exits non-zero.
case System.argv() do
  ["predict", nif_file, model_path, sim] ->
    :ok = HexagonTpu.availability(lib_path: sim, system_lib_path: sim)
    nif = Path.join([to_string(:code.priv_dir(:hexagon_tpu)), "native", nif_file])
    true = File.exists?(nif)
    IO.puts("USER load: the NIF is loaded from #{nif}")

    pixels = fn hot ->
      for r <- 0..3, c <- 0..3, into: <<>>, do: <<hot.(r, c)::float-32-little>>
    end

    on = fn
      true -> 1.0
      false -> 0.0
    end

    patterns = [
      {"horizontal", pixels.(fn r, _c -> on.(r == 1) end)},
      {"vertical", pixels.(fn _r, c -> on.(c == 2) end)},
      {"diagonal", pixels.(fn r, c -> on.(r == c) end)},
      {"corners", pixels.(fn r, c -> on.(r in [0, 3] and c in [0, 3]) end)}
    ]

    {:ok, model} = HexagonTpu.load_model(model_path, lib_path: sim, system_lib_path: sim)

    for {{label, image}, index} <- Enum.with_index(patterns) do
      {:ok, [_logits, probs]} = HexagonTpu.predict(model, [image], output: :binary)
      probs = for <<p::float-32-little <- probs>>, do: p
      best = probs |> Enum.with_index() |> Enum.max_by(&elem(&1, 0)) |> elem(1)

      if best != index,
        do: raise("#{label}: class #{best}, expected #{index} (probabilities #{inspect(probs)})")

      IO.puts("USER predict: #{label} -> #{label} (p=#{Float.round(Enum.at(probs, best), 3)})")
    end

  ["nx_later", model_path, sim] ->
    true = Code.ensure_loaded?(Nx)
    {:ok, model} = HexagonTpu.load_model(model_path, lib_path: sim, system_lib_path: sim)
    # the four patterns as one {4, 16} f32 batch: horizontal, vertical, diagonal, corners
    hot = [
      fn r, _c -> r == 1 end,
      fn _r, c -> c == 2 end,
      fn r, c -> r == c end,
      fn r, c -> r in [0, 3] and c in [0, 3] end
    ]

    images =
      Nx.tensor(for f <- hot, do: for(r <- 0..3, c <- 0..3, do: if(f.(r, c), do: 1.0, else: 0.0)))

    {:ok, [_logits, probs]} = HexagonTpu.predict(model, [images])
    true = is_struct(probs, Nx.Tensor)
    {4, 4} = Nx.shape(probs)
    [0, 1, 2, 3] = probs |> Nx.argmax(axis: 1) |> Nx.to_list()

    IO.puts(
      "USER nx: a {4, 16} Nx batch -> #{inspect(Nx.shape(probs))} probabilities, argmax [0, 1, 2, 3]"
    )

  ["not_loaded", reason] ->
    true = List.keymember?(Application.started_applications(), :hexagon_tpu, 0)
    IO.puts("USER application: hexagon_tpu is running")

    {:error, %HexagonTpu.Error{reason: :nif_not_loaded, message: message}} =
      HexagonTpu.availability()

    if not String.contains?(message, reason), do: raise("#{inspect(reason)} not in: #{message}")
    IO.puts("USER availability/1: #{message}")
end
