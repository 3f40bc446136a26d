[
  inputs: ["{mix,.formatter}.exs", "{config,lib,test,examples,scripts}/**/*.{ex,exs}"]
]
