# Function symbols of an ELF file (.symtab, else .dynsym) and its PT_LOAD segments, in pure
# Python: symbolizes file offsets where binutils is missing.
import struct, bisect
class Elf:
    def __init__(self, path):
        d = open(path, 'rb').read()
        self.loads, self.syms = [], []
        if d[:4] != b'\x7fELF' or d[4] != 2: return
        phoff, shoff = struct.unpack_from('<QQ', d, 0x20)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from('<HHHHH', d, 0x36)
        for i in range(phnum):
            p_type, p_flags, p_offset, p_vaddr, _, p_filesz = struct.unpack_from('<IIQQQQ', d, phoff + i * phentsize)
            if p_type == 1: self.loads.append((p_offset, p_vaddr, p_filesz))
        secs = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
        for want in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
            for s in secs:
                if s[1] != want: continue
                strtab = secs[s[6]]
                for k in range(s[5] // 24):
                    name, info, other, shndx, value, size = struct.unpack_from('<IBBHQQ', d, s[4] + k * 24)
                    if (info & 0xf) == 2 and value:
                        o = strtab[4] + name
                        self.syms.append((value, size, d[o:d.index(b'\0', o)].decode('latin1')))
            if self.syms: break
        self.syms.sort()
        self.starts = [s[0] for s in self.syms]
    def name(self, off):
        v = None
        for p_offset, p_vaddr, p_filesz in self.loads:
            if p_offset <= off < p_offset + p_filesz: v = off - p_offset + p_vaddr
        if v is None: return None
        i = bisect.bisect_right(self.starts, v) - 1
        if i < 0: return None
        value, size, name = self.syms[i]
        return name if v < value + max(size, 1) else None
