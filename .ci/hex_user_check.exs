# Run by .ci/hex-install.sh with `mix run` in a user's project that got hexagon_tpu through
# Hex: only the public API, as a user would.
#
#   predict NIF_FILE MODEL.bin LIBQNN_SIM.so   the NIF loaded from NIF_FILE (a file name under
#                                              hexagon_tpu's priv/native) and the pattern
#                                              classifier (examples/pattern_classifier.json)
#                                              right on each of its four patterns, on qnn_sim
#   not_loaded REASON                          the application runs, availability/1 says why
#                                              the NIF did not load, naming REASON
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

  ["not_loaded", reason] ->
    true = List.keymember?(Application.started_applications(), :hexagon_tpu, 0)
    IO.puts("USER application: hexagon_tpu is running")

    {:error, %HexagonTpu.Error{reason: :nif_not_loaded, message: message}} =
      HexagonTpu.availability()

    if not String.contains?(message, reason), do: raise("#{inspect(reason)} not in: #{message}")
    IO.puts("USER availability/1: #{message}")
end
