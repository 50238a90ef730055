import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

// Child processes run the built packages (dist): build with `npx turbo run build --filter=@dsh/session-query-sqlite...`.
const workers = join(fileURLToPath(new URL('.', import.meta.url)), 'workers')

export interface Child {
  /** Settles when the process has exited: its exit code or the signal that ended it, and what it printed. */
  readonly done: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>
  readonly stdin: NodeJS.WritableStream
  /** Resolves when the process has printed `line` on its own line (or rejects when it exits first). */
  printed(line: string): Promise<void>
  kill(signal: NodeJS.Signals): void
}

/** Runs `tests/workers/<script>` in a new Node process. */
export function run(script: string, args: readonly string[]): Child {
  const child = spawn(process.execPath, [join(workers, script), ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  const waiters: Array<() => void> = []
  child.stdout.on('data', (chunk) => {
    stdout += chunk
    for (const wake of waiters.splice(0)) wake()
  })
  child.stderr.on('data', (chunk) => {
    stderr += chunk
  })
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })),
  )
  const printed = async (line: string): Promise<void> => {
    let exited = false
    void done.then(() => {
      exited = true
      for (const wake of waiters.splice(0)) wake()
    })
    while (!stdout.split('\n').includes(line)) {
      if (exited) throw new Error(`${script} exited before printing '${line}': ${stderr}`)
      await new Promise<void>((wake) => waiters.push(wake))
    }
  }
  return { stdin: child.stdin, done, printed, kill: (signal) => void child.kill(signal) }
}
