"""samsa's Kafka codec generator, behind net/kafka/codegen/gen.py (the command CMake runs).

model (ranges, types, messages) <- schema (the .ks reader) <- cxx (what the emitters share)
<- header, source, tables, testing (one kind of generated file each).
"""
