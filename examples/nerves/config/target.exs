# examples/nerves: hexagon_tpu's lines in a Nerves project's config/target.exs (the rest of
# that file is the project's own).
import Config

# Qualcomm's QNN runtime for the board, of the same QAIRT as `mix hexagon_tpu.compile`, written
# by `mix hexagon_tpu.runtime --into rootfs_overlay` (README.md, step 3).
config :nerves, :firmware, rootfs_overlay: "rootfs_overlay"

# The model MyApp.Application serves: a context binary made by `mix hexagon_tpu.compile`, on
# the application data partition. Other keys are HexagonTpu.Serving.new/2's options.
config :my_app, :classifier, model: "/data/classifier.bin"
