import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface TempDirOptions {
  /**
   * Put the directory on tmpfs (`/dev/shm`) where the machine has one: a real
   * file system on which creating thousands of files takes seconds rather
   * than a minute. Elsewhere the directory is made under `os.tmpdir()`.
   */
  readonly memory?: boolean
}

export interface TempDir {
  /** The new, empty directory (absolute path). */
  readonly dir: string
  /** Removes the directory and everything in it; calling it again does nothing. */
  readonly cleanup: () => void
}

/**
 * A fresh temporary directory whose name starts with `prefix`. The caller
 * owns its removal: hand `cleanup` to the test runner (`onTestFinished`,
 * `afterAll`) or call it in a `finally`.
 */
export function tempDir(prefix = 'dsh-test-', options: TempDirOptions = {}): TempDir {
  const base = options.memory === true && existsSync('/dev/shm') ? '/dev/shm' : tmpdir()
  const dir = mkdtempSync(join(base, prefix))
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}
