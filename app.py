"""CDK entry point: both environments' stacks (`make synth`, or the cdk CLI via cdk.json)."""

import os

from infra.synth import build_app

# Under the cdk CLI, CDK_OUTDIR and CDK_CONTEXT_JSON come from the CLI (its context wins
# over cdk.json's, which build_app loads as defaults); run directly, write to cdk.out.
app, _ = build_app(outdir=os.environ.get("CDK_OUTDIR", "cdk.out"))
app.synth()
