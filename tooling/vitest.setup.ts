import { afterAll, afterEach } from 'vitest'

// Every process warning fails the test run: a MaxListenersExceededWarning is
// a leak, a DeprecationWarning (from Node or a dependency) is a break waiting
// for the next upgrade, and both are easy to miss in a green run's stderr.
// A warning during a test fails that test; one during a file's import or its
// hooks fails the file (afterAll). Unhandled rejections and uncaught errors
// are vitest's own: it reports them and exits non-zero
// (tooling/tests/vitest-preset.spec.ts pins both).
//
// One listener per process: a worker that runs several files evaluates this
// module once per file, and a listener per file would itself trip the
// MaxListeners limit.
type Recorder = { warnings: string[] }
const key = Symbol.for('dsh.vitest.warnings')
const holder = globalThis as { [key]?: Recorder }
if (holder[key] === undefined) {
  const created: Recorder = { warnings: [] }
  process.on('warning', (warning) => {
    created.warnings.push(warning.stack ?? `${warning.name}: ${warning.message}`)
  })
  holder[key] = created
}
const recorder = holder[key]

// process.emitWarning delivers on a later tick: let it land before looking.
const settle = () => new Promise<void>((resolve) => setImmediate(resolve))

function failOnWarnings(where: string): void {
  if (recorder.warnings.length === 0) return
  const text = recorder.warnings.splice(0).join('\n\n')
  throw new Error(`process warning ${where} (warnings fail the run; fix the cause, do not silence it):\n${text}`)
}

afterEach(async () => {
  await settle()
  failOnWarnings('during this test or the hooks before it')
})

afterAll(async () => {
  await settle()
  failOnWarnings('while loading this file or in its hooks')
})
