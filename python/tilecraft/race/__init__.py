"""Drop-ins for kernel-race harnesses (see tilecraft.race.moe)."""
