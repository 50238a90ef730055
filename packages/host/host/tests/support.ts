import { tempDir } from '@dsh/test-kit'
import { onTestFinished } from 'vitest'

/** A private temporary directory removed when the test finishes. */
export function scratchDir(prefix: string): string {
  const { dir, cleanup } = tempDir(prefix)
  onTestFinished(cleanup)
  return dir
}

/** What `open` rejects or throws with; a test fails when it succeeds. */
export async function failureOf(open: () => unknown): Promise<unknown> {
  try {
    await open()
  } catch (error) {
    return error
  }
  throw new Error('expected the open to fail')
}
