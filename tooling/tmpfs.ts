import { execFileSync } from 'node:child_process'
import { closeSync, openSync, writeSync } from 'node:fs'

// A full disk for tests, for real: a fresh tmpfs mounted on a directory (we
// run as root here and in CI). A machine where the mount is refused fails the
// test with the reason; it is never skipped.

/** Mounts a fresh tmpfs of `size` (`mount -o size=`, e.g. `2m`) on `dir`, private to its owner. */
export function mountTmpfs(dir: string, size: string): void {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir], { stdio: 'pipe' })
  } catch (error) {
    const detail = (error as { stderr?: Buffer }).stderr?.toString().trim() || (error as Error).message
    throw new Error(
      `This test needs to mount a ${size} tmpfs (run as root, or with CAP_SYS_ADMIN; CI runs as root): mount -t tmpfs failed: ${detail}`,
    )
  }
}

/** Unmounts `dir` (lazily if it is still busy). */
export function unmount(dir: string): void {
  try {
    execFileSync('umount', [dir], { stdio: 'pipe' })
  } catch {
    execFileSync('umount', ['-l', dir], { stdio: 'pipe' })
  }
}

/** Writes `path` until the file system refuses a page; returns the bytes written. */
export function fill(path: string): number {
  const fd = openSync(path, 'w', 0o600)
  let total = 0
  try {
    for (const chunk of [64 * 1024, 4096, 1]) {
      const data = Buffer.alloc(chunk, 0x61)
      for (;;) {
        try {
          total += writeSync(fd, data)
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error
          break
        }
      }
    }
  } finally {
    closeSync(fd)
  }
  return total
}
