"""What is measured about this host: the weight type the embedded model runs in (``weights``),
requantized copies (``quantize``), the verify-cost curve (``verify_cost``) and batch-shape
noise (``noise``). Above the backends and the loop (it runs them), below the front door."""
