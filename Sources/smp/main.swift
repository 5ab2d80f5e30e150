print("smp")
