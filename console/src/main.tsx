// The console's entry: routes under /console/, signed-in pages behind the session check.
import { StrictMode, type ReactNode } from "react";
import { createRoot } from "react-dom/client";
import { BrowserRouter, Navigate, Route, Routes, useLocation } from "react-router-dom";
import { Layout } from "./components/Layout";
import { Loading } from "./components/ui";
import { ForgotPassword, ResetPassword, SignIn, SignUp } from "./pages/Auth";
import { Batch } from "./pages/Batch";
import { Batches } from "./pages/Batches";
import { Billing } from "./pages/Billing";
import { Keys } from "./pages/Keys";
import { Overview } from "./pages/Overview";
import { Quotes } from "./pages/Quotes";
import { Settings } from "./pages/Settings";
import { Usage } from "./pages/Usage";
import { SessionProvider, useSession } from "./session";
import "./styles.css";

function RequireSession({ children }: { children: ReactNode }) {
  const { session, loading } = useSession();
  const location = useLocation();
  if (loading) return <Loading what="your session" />;
  if (!session) return <Navigate to="/sign-in" replace state={{ from: location.pathname }} />;
  return <>{children}</>;
}

function NotFound() {
  return (
    <>
      <h1>Not found</h1>
      <p>This console page does not exist.</p>
    </>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <BrowserRouter basename="/console">
      <SessionProvider>
        <Routes>
          <Route path="/sign-in" element={<SignIn />} />
          <Route path="/sign-up" element={<SignUp />} />
          <Route path="/forgot-password" element={<ForgotPassword />} />
          <Route path="/reset-password" element={<ResetPassword />} />
          <Route
            element={
              <RequireSession>
                <Layout />
              </RequireSession>
            }
          >
            <Route index element={<Overview />} />
            <Route path="batches" element={<Batches />} />
            <Route path="batches/:batchId" element={<Batch />} />
            <Route path="quotes" element={<Quotes />} />
            <Route path="usage" element={<Usage />} />
            <Route path="billing" element={<Billing />} />
            <Route path="keys" element={<Keys />} />
            <Route path="settings" element={<Settings />} />
            <Route path="*" element={<NotFound />} />
          </Route>
        </Routes>
      </SessionProvider>
    </BrowserRouter>
  </StrictMode>,
);
