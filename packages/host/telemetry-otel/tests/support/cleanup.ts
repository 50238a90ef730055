import { afterEach } from 'vitest'
import { type OtlpReceiver, startOtlpReceiver } from '../../src/testing/index.js'

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Runs `cleanup` after the current test; the latest registered runs first (a host is disposed before its receiver closes). */
export function afterThisTest(cleanup: () => Promise<void> | void): void {
  cleanups.push(cleanup)
}

/** A real OTLP/HTTP receiver, closed after the current test. */
export async function receiver(): Promise<OtlpReceiver> {
  const started = await startOtlpReceiver()
  afterThisTest(() => started.close())
  return started
}
