// Dry-runs an import of a v0 root with the built package and prints, as its
// last line, the report's counts, or the code and message of what the run
// threw: for tests that run it with a small stack (`--stack-size`), so that a
// recursion over the root's sessions shows at a size a test can build.
import { importV0 } from '@dsh/session-import-v0'

const [from] = process.argv.slice(2)
try {
  const report = await importV0({ from, dryRun: true })
  console.log(JSON.stringify({ imported: report.imported, failed: report.failed, order: report.sessions.map((s) => s.id) }))
} catch (error) {
  console.log(JSON.stringify({ thrown: { name: error?.name, code: error?.code, message: error?.message } }))
}
