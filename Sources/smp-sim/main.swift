print("smp-sim")
