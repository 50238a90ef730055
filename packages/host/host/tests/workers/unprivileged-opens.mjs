// Runs as an unprivileged user (the test starts it with runuser): opens the
// root it is given with each function of @dsh/host that takes a root, and
// prints what each did as one JSON line.
import { checkDerivedFiles, createHost, createQueryHost, rebuildIndex, rootPermissionWarning, verifyRoot } from '@dsh/host'

const [root] = process.argv.slice(2)
const opens = {
  createHost: () => createHost({ root, readOnly: true }),
  createQueryHost: () => createQueryHost({ root, readOnly: true }),
  verifyRoot: () => verifyRoot(root),
  rebuildIndex: () => rebuildIndex({ root }),
  checkDerivedFiles: () => checkDerivedFiles(root),
  rootPermissionWarning: () => rootPermissionWarning(root),
}
const results = {}
for (const [name, open] of Object.entries(opens)) {
  try {
    const opened = await open()
    if (typeof opened?.dispose === 'function') await opened.dispose()
    results[name] = { opened: true }
  } catch (error) {
    results[name] = { code: error.code ?? null, message: error.message, details: error.details ?? null }
  }
}
process.stdout.write(`${JSON.stringify({ uid: process.getuid(), results })}\n`)
