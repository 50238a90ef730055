import { Writable } from 'node:stream'
import { runCli } from '../../src/index.js'

export interface CliRun {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs the CLI in this process with captured stdout/stderr (not a TTY) and the given environment. */
export async function cli(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  let stdout = ''
  let stderr = ''
  const sink = (append: (text: string) => void) =>
    new Writable({
      write(chunk: Buffer | string, _encoding, callback) {
        append(chunk.toString())
        callback()
      },
    })
  const code = await runCli(args, { out: sink((t) => (stdout += t)), err: sink((t) => (stderr += t)), env })
  return { code, stdout, stderr }
}
