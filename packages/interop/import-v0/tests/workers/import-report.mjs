// Dry-runs an import of a v0 root with the built package and prints, as its
// last line, the uid it ran as and each session's status, code and path, or
// the code and message of what the run threw: for tests that run it as
// another user (a permission fault is one only for a user it applies to).
import { importV0 } from '@dsh/session-import-v0'

const [from] = process.argv.slice(2)
const uid = process.getuid?.()
try {
  const report = await importV0({ from, dryRun: true })
  const sessions = report.sessions.map((s) => ({
    id: s.id,
    path: s.path,
    status: s.status,
    code: s.reason?.code,
    message: s.reason?.message,
  }))
  console.log(JSON.stringify({ uid, imported: report.imported, failed: report.failed, sessions }))
} catch (error) {
  console.log(JSON.stringify({ uid, thrown: { code: error?.code, message: error?.message } }))
}
