import { createModelClient, createOpenAISummarizer } from '@dsh/driver-openai'
import { type Session, SessionId } from '@dsh/session'
import { type CommandIo, intOption, onePositional, type ParsedCommand } from '../command.js'
import { openHost, warnIfExposed } from '../host-access.js'
import { printJson } from '../output.js'
import { safe } from '../terminal.js'

/**
 * `dsh compact <id> [--keep N] [--model M] [--base-url URL]`: summarizes all
 * but the newest N context messages of a session through an
 * OpenAI-compatible model and appends the compaction to its log
 * (`compaction/start`, `/summary`, `/end`); nothing already in the log
 * changes, so `dsh show` still lists every event. The session is loaded as
 * a writer: crash repair closes a compaction a killed process left open,
 * and a session another process is writing is refused with
 * `SESSION_PERSISTENCE_LOCKED`. A failed summary leaves `compaction/end
 * {error}` and exits 1 (`COMPACTION_SUMMARIZER_FAILED`). The API key comes
 * from DSH_API_KEY or OPENAI_API_KEY only.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  const id = onePositional(command, 'session id')
  const keep = intOption(command, 'keep')
  const model = command.string('model')
  const baseURL = command.string('base-url')
  const client = createModelClient({
    env: io.env,
    ...(model === undefined ? {} : { model }),
    ...(baseURL === undefined ? {} : { baseURL }),
  })
  // Each stage is reported once its events are durable (stderr, so --json output stays one document).
  const onProgress = (stage: string): void => void io.err.write(`dsh: compaction ${stage}\n`)
  const host = await openHost(command, { summarizer: createOpenAISummarizer({ client }), compaction: { onProgress } }, io)
  try {
    warnIfExposed(host.root, io)
    const session: Session = host.sessions.get(id) ?? host.sessions.restore(await host.persistence.load(SessionId(id)))
    const result = await host.ctx.require('compaction').compact(session, { reason: 'manual', ...(keep === undefined ? {} : { keep }) })
    if (command.json) printJson(result, io.out)
    else
      io.out.write(
        safe`compacted ${session.id}: ${result.shadowed} message(s), events [${result.from}, ${result.to}) summarized; about ${result.tokensBefore} -> ${result.tokensAfter} tokens\n`,
      )
    return 0
  } finally {
    await host.dispose()
  }
}
