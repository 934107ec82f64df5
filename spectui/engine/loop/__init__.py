"""The decode loop and what it decides with: ``decode`` (AR and speculative steps written once
against ``protocol.Backend`` / ``protocol.Drafter``), ``sampling`` (greedy and sampled
verification), ``draft_length`` (a fixed K or the cost-aware K) and ``policy`` (the fallback
ladder). Imports only ``spectui.engine.protocol`` of the engine, and the layers below it."""
