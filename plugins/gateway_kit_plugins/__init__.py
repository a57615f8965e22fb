"""gateway_kit's built-in plugins: ordinary plugins, registered through this distribution's
``gateway_kit`` entry points and marked ``trylast``, so that a deployment's own plugins are
asked first."""
