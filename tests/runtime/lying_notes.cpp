// A shared library whose .note.fatpack notes lie (unload_test.cpp's lying-notes case): one note to a
// record whose name holds a control byte and whose bounds are reversed, one with a 4-byte
// descriptor, one pointing far outside the library, twenty pointing to records with a wrong magic.
// No runtime, no package: the registry of the process that dlopen()s it must skip every note, never
// read outside the library, and keep its messages short.
asm(".pushsection .data.rel.ro,\"aw\"\n"
    ".balign 8\n"
    "lying_bad_magic: .fill 640, 1, 0x5a\n"
    "lying_name: .asciz \"evil\\033[7m\"\n"
    ".balign 8\n"
    "lying_reversed: .long 0x52504B46, 1\n.quad lying_name, lying_bad_magic + 64, lying_bad_magic\n"
    ".popsection\n"
    ".pushsection .note.fatpack,\"a\",@note\n"
    ".balign 4\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\ndr: .quad lying_reversed - dr\n"
    ".long 8, 4, 1\n.asciz \"fatpack\"\n.long 0\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\n.quad 0x100000000000\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd0: .quad lying_bad_magic + 0 - d0\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd1: .quad lying_bad_magic + 32 - d1\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd2: .quad lying_bad_magic + 64 - d2\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd3: .quad lying_bad_magic + 96 - d3\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd4: .quad lying_bad_magic + 128 - d4\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd5: .quad lying_bad_magic + 160 - d5\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd6: .quad lying_bad_magic + 192 - d6\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd7: .quad lying_bad_magic + 224 - d7\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd8: .quad lying_bad_magic + 256 - d8\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd9: .quad lying_bad_magic + 288 - d9\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd10: .quad lying_bad_magic + 320 - d10\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd11: .quad lying_bad_magic + 352 - d11\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd12: .quad lying_bad_magic + 384 - d12\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd13: .quad lying_bad_magic + 416 - d13\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd14: .quad lying_bad_magic + 448 - d14\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd15: .quad lying_bad_magic + 480 - d15\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd16: .quad lying_bad_magic + 512 - d16\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd17: .quad lying_bad_magic + 544 - d17\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd18: .quad lying_bad_magic + 576 - d18\n"
    ".long 8, 8, 1\n.asciz \"fatpack\"\nd19: .quad lying_bad_magic + 608 - d19\n"
    ".popsection\n");

extern "C" __attribute__((visibility("default"))) int fatpack_test_lying_notes() { return 1; }
